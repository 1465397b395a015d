"""The policy update of one rollout step on one rank: pi_old's log-probs, the
loss calls, the non-finite-loss guard.

Device discipline: batches are packed on the CPU (cheap Python work) and
moved to the rank's device in one place, `PolicyUpdate.packed`; every other
tensor of the update (rewards, pi_old's rows, the reference log-probs) is
built on that device. The loss calls' metrics stay there as 0-dim tensors
and are read once per step (rlvr.step_metrics): on a GPU each read is a host
sync. The one sync per loss call left is deliberate: whether the loss is
finite decides what is back-propagated.

pi_old costs half a forward pass: until the first optimizer step of a
rollout step the policy still is pi_old, so the first mini-batch takes its
old log-probs (and the step's entropy metrics) from its own update forward;
the other mini-batches get a no-grad pass first.
"""

from __future__ import annotations

import random

import torch

from rlvr import distributed
from rlvr.groups import Group
from rlvr.objectives.base import PolicyBatch, policy_kl
from rlvr.objectives.siren import anchor_value
from rlvr.policy import ENTROPIES, Packed, evaluate_tokens, pack
from rlvr.step_metrics import StepMetrics


class EntropyMeter:
    """pi_old's entropies over a step's response tokens (device sums, read once
    per step), and on SIREN's first step the top-p entropies its anchor comes from."""

    def __init__(self, keep_for_anchor: bool = False):
        self.keep_for_anchor = keep_for_anchor
        self.sums: dict[str, torch.Tensor] = {}
        self.tokens = 0.0
        self.kept: list[tuple[torch.Tensor, torch.Tensor]] = []

    def add(self, out: dict[str, torch.Tensor], mask: torch.Tensor, tokens: int) -> None:
        for name in ENTROPIES:
            total = (out[name].detach() * mask).sum().double()
            self.sums[name] = self.sums[name] + total if name in self.sums else total
        self.tokens += tokens
        if self.keep_for_anchor:
            self.kept.append((out["topp_entropy"].detach(), mask))

    def anchor(self, quantile: float) -> float:
        """Over every rollout of the step on every rank: the response-weighted
        mean of the per-loss-call aggregates."""
        weighted = sum(anchor_value(h, m, quantile) * h.shape[0] for h, m in self.kept)
        rows = sum(h.shape[0] for h, _ in self.kept)
        weighted, rows = distributed.all_sum([weighted, float(rows)])
        return weighted / rows


def response_tokens(groups: list[Group]) -> int:
    return sum(len(r) for g in groups for r in g.responses)


def forward_tokens(groups: list[Group]) -> int:
    """Real tokens one forward pass over `groups` reads (a prompt per response)."""
    return sum(len(g.prompt_ids) + len(r) for g in groups for r in g.responses)


def loss_calls_per_update(train, world: int) -> int:
    """Loss calls per optimizer step on one rank (DeepSpeed's gradient accumulation)."""
    return train.mini_batch_questions // world // train.micro_batch_questions


def keep_old_logp(micro: list[Group], logp: torch.Tensor) -> None:
    """Store each response's pi_old log-probs (rows of `logp` in micro-batch order)."""
    rows = iter(logp.detach())
    for g in micro:
        g.old_logp = [next(rows)[: len(r)].clone() for r in g.responses]


class PolicyUpdate:
    """One rank's update: `engine` is DeepSpeed's (or anything with `.module`,
    `.backward(loss)` and `.step()`, stepping the optimizer every
    `micro_per_update` calls); `loss_fn(batch, hp)` the objective."""

    def __init__(self, engine, loss_fn, hp, train, pad_id: int, ranks: distributed.Ranks, device: torch.device,
                 entropies=(), grad_entropies=(), ref_model=None):
        self.engine, self.loss_fn, self.hp, self.train = engine, loss_fn, hp, train
        self.pad_id, self.ranks, self.device = pad_id, ranks, device
        self.entropies, self.grad_entropies = set(entropies), set(grad_entropies)
        self.ref_model = ref_model
        self.topp = {"top_p": hp.entropy_top_p, "top_k": hp.entropy_top_k}
        self.reuse_first_forward = True  # False: a separate pi_old pass for every group (tests compare the two)

    @property
    def micro_per_update(self) -> int:
        return loss_calls_per_update(self.train, self.ranks.world)

    @property
    def measures_anchor(self) -> bool:
        return "topp_entropy" in self.entropies

    def micro_batches(self, groups: list[Group]) -> list[list[Group]]:
        m = self.train.micro_batch_questions
        return [groups[i : i + m] for i in range(0, len(groups), m)]

    def packed(self, groups: list[Group]) -> Packed:
        """The loss call's batch, packed on the CPU and moved to the rank's
        device: the one place where training data leaves the host."""
        prompts = [g.prompt_ids for g in groups for _ in g.responses]
        responses = [r for g in groups for r in g.responses]
        return pack(prompts, responses, self.pad_id, group_size=self.train.responses_per_question).to(self.device)

    def epoch_orders(self, groups: list[Group], position: int) -> list[list[Group]]:
        """The order of this rank's groups in each epoch. The first epoch keeps
        the sampled order, so the ranks' mini-batches are the one-rank
        mini-batches split (rlvr.distributed.Ranks.share); later epochs
        reshuffle each rank's share."""
        rng = random.Random(self.train.seed + position + 7919 * self.ranks.rank)
        orders = [groups[:]]
        for _ in range(1, self.train.epochs_per_step):
            order = groups[:]
            rng.shuffle(order)
            orders.append(order)
        return orders

    def old_pass_groups(self, groups: list[Group], first_order: list[Group], anchor_pending: bool) -> list[Group]:
        """Groups whose pi_old log-probs need a forward pass of their own: all
        but the first mini-batch's, or all of them on SIREN's first step (its
        anchor is over every rollout of the step and must exist before the first loss)."""
        if anchor_pending or not self.reuse_first_forward:
            return groups
        on_policy = {id(g) for g in first_order[: self.train.mini_batch_questions // self.ranks.world]}
        return [g for g in groups if id(g) not in on_policy]

    @torch.no_grad()
    def old_logprobs(self, groups: list[Group], meter: EntropyMeter) -> None:
        """pi_old's log-probs of `groups`, and their entropies into `meter`."""
        for micro in self.micro_batches(groups):
            packed = self.packed(micro)
            out = evaluate_tokens(self.engine.module, packed, self.train.temperature, entropies=ENTROPIES,
                                  topp=self.topp)
            meter.add(out, packed.response_mask, response_tokens(micro))
            keep_old_logp(micro, out["logp"])

    def policy_batch(self, micro: list[Group], packed: Packed, out: dict, token_norm: float,
                     anchor: float | None) -> PolicyBatch:
        old = torch.zeros_like(out["logp"])
        for i, lp in enumerate(lp for g in micro for lp in g.old_logp):
            old[i, : lp.numel()] = lp
        ref = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref = evaluate_tokens(self.ref_model, packed, self.train.temperature)["logp"]
        return PolicyBatch(
            logp=out["logp"], old_logp=old, mask=packed.response_mask,
            rewards=torch.tensor([r for g in micro for r in g.rewards], device=self.device),
            group_size=self.train.responses_per_question,
            max_response_len=max(self.train.max_response_tokens, packed.response_ids.shape[1]),
            ref_logp=ref, entropy=out.get("entropy"), topp_entropy=out.get("topp_entropy"),
            entropy_anchor=anchor, token_norm=token_norm,
        )

    def token_norms(self, mini_batches: list[list[list[Group]]]) -> list[float]:
        """Per optimizer step: real tokens of the whole mini-batch (all ranks)
        per loss call, the divisor of a token-level mean (DAPO)."""
        local = [float(sum(response_tokens(micro) for micro in mb)) for mb in mini_batches]
        calls = self.micro_per_update * self.ranks.world
        return [max(n, 1.0) / calls for n in distributed.all_sum(local)]

    def run(self, groups: list[Group], position: int, anchor: float | None, metrics: StepMetrics,
            timer) -> tuple[float | None, int]:
        """The whole update of one rollout step. Returns SIREN's anchor (measured
        on its first step) and how many groups had a pi_old pass of their own."""
        orders = self.epoch_orders(groups, position)
        pending = self.measures_anchor and anchor is None
        meter = EntropyMeter(keep_for_anchor=pending)
        separate = self.old_pass_groups(groups, orders[0], pending)
        with timer("old_logprobs"):
            self.old_logprobs(separate, meter)
            if pending:
                anchor = meter.anchor(self.hp.peak_quantile)
        with timer("update"):
            self._loss_calls(orders, meter, metrics, anchor)
        metrics.add_entropies(meter.sums, meter.tokens)
        return anchor, len(separate)

    def _loss_calls(self, orders: list[list[Group]], meter: EntropyMeter, metrics: StepMetrics,
                    anchor: float | None) -> None:
        """epochs x mini-batches; the engine steps the optimizer at each mini-batch boundary."""
        per_update = self.micro_per_update
        mini_batches = [self.micro_batches(order)[i : i + per_update]
                        for order in orders for i in range(0, len(self.micro_batches(order)), per_update)]
        skipped, calls = 0, 0
        for mb, token_norm in zip(mini_batches, self.token_norms(mini_batches)):
            for micro in mb:
                packed = self.packed(micro)
                on_policy = micro[0].old_logp is None  # pi_theta is still pi_old: measure it here
                if on_policy and calls >= per_update:
                    raise RuntimeError("old log-probs missing after an optimizer step")
                out = evaluate_tokens(self.engine.module, packed, self.train.temperature,
                                      entropies=ENTROPIES if on_policy else self.entropies,
                                      grad_entropies=self.grad_entropies, topp=self.topp)
                if on_policy:
                    meter.add(out, packed.response_mask, response_tokens(micro))
                    keep_old_logp(micro, out["logp"])
                batch = self.policy_batch(micro, packed, out, token_norm, anchor)
                result = self.loss_fn(batch, self.hp)
                metrics.totals["train_tokens"] += float(forward_tokens(micro))
                if bool(torch.isfinite(result.loss)):  # the one host sync of a loss call
                    self.engine.backward(result.loss)
                else:
                    # A non-finite loss never reaches the weights: back-propagate an
                    # exact zero instead, so DeepSpeed's accumulation stays consistent.
                    skipped += 1
                    self.engine.backward(sum(p.sum() for p in self.engine.module.parameters()) * 0.0)
                self.engine.step()
                with torch.no_grad():
                    kl = policy_kl(batch.logp, batch.old_logp, batch.mask)
                metrics.add_loss_call({"kl": kl, "loss": result.loss.detach(), **result.metrics})
                calls += 1
        metrics.totals["skipped_updates"] += skipped
        metrics.maxima["skipped_step"] = float(skipped > 0)
