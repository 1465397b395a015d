"""The policy update of one rollout step on one rank: pi_old's log-probs, the
loss calls, the non-finite-loss guard.

Device discipline: batches are packed on the CPU (cheap Python work) and
moved to the rank's device in one place, `PolicyUpdate.packed`; every other
tensor of the update (rewards, pi_old's rows, the reference log-probs) is
built on that device. The loss calls' metrics stay there as 0-dim tensors
and are read once per step (rlvr.training.step_metrics): on a GPU each read is a host
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
from rlvr.objectives.base import MiniBatchTotals, PolicyBatch, policy_kl
from rlvr.rollout.groups import Group
from rlvr.settings.call_plan import CallPlan
from rlvr.training.entropy import ENTROPIES, EntropyMeter
from rlvr.training.loss_calls import Row, plan_calls, row_tokens, rows_of
from rlvr.training.packing import Packed, pack, pack_flat
from rlvr.training.policy import evaluate_tokens
from rlvr.training.step_metrics import StepMetrics


def response_tokens(rows: list[Row]) -> int:
    return sum(len(g.responses[i]) for g, i in rows)


def forward_tokens(rows: list[Row]) -> int:
    """Real tokens one forward pass over `rows` reads (a prompt per response)."""
    return sum(row_tokens(r) for r in rows)


class OldLogProbs:
    """pi_old's log-probs of one rollout step's responses, per row, kept by the update that
    measures them (a pass of their own, or the first mini-batch's own forward) for every
    later loss call of the step. The rollouts themselves carry no training state."""

    def __init__(self):
        self._rows: dict[tuple[int, int], torch.Tensor] = {}
        self._groups: list[Group] = []  # keeps each group alive, so its id stays its own

    def keep(self, rows: list[Row], logp: torch.Tensor) -> None:
        """Each row's log-probs (`logp`'s rows in `rows`' order), cut to its response."""
        for (g, i), lp in zip(rows, logp.detach()):
            self._groups.append(g)
            self._rows[(id(g), i)] = lp[: len(g.responses[i])].clone()

    def of(self, rows: list[Row], like: torch.Tensor) -> torch.Tensor:
        """The rows' log-probs as one padded batch shaped as `like`."""
        old = torch.zeros_like(like)
        for k, (g, i) in enumerate(rows):
            lp = self._rows.get((id(g), i))
            if lp is None:
                raise RuntimeError("a loss call after the first optimizer step has no pi_old log-probs for a row")
            old[k, : lp.numel()] = lp
        return old


class PolicyUpdate:
    """One rank's update: `engine` is DeepSpeed's (or anything with `.module`,
    `.backward(loss, scale_wrt_gas=False)` and `.step()`), stepped once per
    mini-batch after its loss calls (rlvr.training.loss_calls): the caller owns the
    accumulation boundary, since the number of calls varies with the lengths;
    `loss_fn(batch, objective)` is the objective's loss, returning its call's
    share of the mini-batch loss, and `objective` its settings, which say what
    the loss needs (ObjectiveParams.needs)."""

    def __init__(self, engine, loss_fn, objective, train, pad_id: int, ranks: distributed.Ranks, device: torch.device,
                 ref_model=None):
        self.engine, self.loss_fn, self.objective, self.train = engine, loss_fn, objective, train
        self.pad_id, self.ranks, self.device = pad_id, ranks, device
        self.needs = objective.needs()
        self.ref_model = ref_model
        if self.needs.reference_model and ref_model is None:
            raise ValueError(f"{objective.objective} with these settings needs a reference model (ref_model)")
        self.plan = CallPlan(train, ranks.world, self.needs.whole_groups)  # how a mini-batch becomes loss calls
        self.topp = {"top_p": self.needs.topp[0], "top_k": self.needs.topp[1]}

    @property
    def measures_anchor(self) -> bool:
        return self.needs.anchor is not None

    def mini_batches(self, order: list[Group]) -> list[list[Row]]:
        """This rank's rows of each mini-batch of `order`: its groups of each
        (order holds this rank's share), or, when the ranks share responses
        (CallPlan.shared), its slice of each mini-batch's rows (order holds
        every group)."""
        world, rank, m = self.ranks.world, self.ranks.rank, self.train.mini_batch_questions
        if not self.plan.shared:
            return [rows_of(order[i : i + m // world]) for i in range(0, len(order), m // world)]
        out, s = [], self.plan.rows
        for i in range(0, len(order), m):
            rows = rows_of(order[i : i + m])
            if s > 0:  # call k of every rank together: rows [k W s, (k + 1) W s) of the mini-batch, in order
                out.append([r for k in range(0, len(rows), world * s) for r in rows[k + rank * s : k + (rank + 1) * s]])
            else:
                part = len(rows) // world
                out.append(rows[rank * part : (rank + 1) * part])
        return out

    def packed(self, rows: list[Row]) -> Packed:
        """The loss call's batch, packed on the CPU and moved to the rank's
        device: the one place where training data leaves the host. Whole
        groups share their prompt's forward pass (rlvr.training.policy)."""
        prompts, responses = [g.prompt_ids for g, _ in rows], [g.responses[i] for g, i in rows]
        if self.train.padding_free:
            return pack_flat(prompts, responses, self.pad_id).to(self.device)
        n = self.train.responses_per_question
        whole = self.plan.whole_groups and len(rows) % n == 0 and all(i == k % n for k, (_, i) in enumerate(rows))
        return pack(prompts, responses, self.pad_id, group_size=n if whole else 1).to(self.device)

    def epoch_orders(self, groups: list[Group], position: int) -> list[list[Group]]:
        """The order of the groups in each epoch. The first epoch keeps the
        sampled order, so the ranks' mini-batches are the one-rank mini-batches
        split (rlvr.distributed.Ranks.share); later epochs reshuffle each rank's
        share, or all groups alike on every rank when the ranks share responses."""
        own = 0 if self.plan.shared else self.ranks.rank
        rng = random.Random(self.train.seed + position + 7919 * own)
        orders = [groups[:]]
        for _ in range(1, self.train.epochs_per_step):
            order = groups[:]
            rng.shuffle(order)
            orders.append(order)
        return orders

    def old_pass_rows(self, first_epoch: list[list[Row]], anchor_pending: bool) -> list[Row]:
        """Rows whose pi_old log-probs need a forward pass of their own: all
        but the first mini-batch's, or all of them on the first step of an
        objective with an anchor (over every rollout of the step, it must
        exist before the first loss)."""
        skip = 0 if anchor_pending else 1
        return [r for mb in first_epoch[skip:] for r in mb]

    @torch.no_grad()
    def old_logprobs(self, rows: list[Row], meter: EntropyMeter, old: OldLogProbs) -> None:
        """pi_old's log-probs of `rows` into `old`, and their entropies into `meter`."""
        for call in plan_calls(rows, self.plan, agree=False):
            packed = self.packed(call)
            out = evaluate_tokens(self.engine.module, packed, self.train.temperature, entropies=ENTROPIES,
                                  topp=self.topp)
            meter.add(out, packed.response_mask, response_tokens(call))
            old.keep(call, out["logp"])

    def policy_batch(self, rows: list[Row], packed: Packed, out: dict, old: torch.Tensor, totals: MiniBatchTotals,
                     anchor: float | None) -> PolicyBatch:
        ref = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref = evaluate_tokens(self.ref_model, packed, self.train.temperature)["logp"]
        return PolicyBatch(
            logp=out["logp"], old_logp=old, mask=packed.response_mask,
            rewards=torch.tensor([g.rewards[i] for g, i in rows], device=self.device),
            group_size=self.train.responses_per_question,
            group_rewards=torch.tensor([g.rewards for g, _ in rows], device=self.device),
            max_response_len=max(self.train.max_response_tokens, packed.response_ids.shape[1]),
            ref_logp=ref, entropy=out.get("entropy"), topp_entropy=out.get("topp_entropy"),
            entropy_anchor=anchor, totals=totals,
            gather=distributed.gather_rows if self.plan.gathered else None,
            gather_ranks=self.ranks.world if self.plan.gathered else 1,
            levels=None if any(g.levels is None for g, _ in rows) else
            torch.tensor([g.levels[i] for g, i in rows], device=self.device),
        )

    def mini_batch_totals(self, mini_batches: list[list[Row]]) -> list[MiniBatchTotals]:
        """Per optimizer step: its responses, real response tokens and groups
        on all ranks, what the objectives' batch-level means divide by."""
        local = []
        for rows in mini_batches:
            local += [float(len(rows)), float(response_tokens(rows)),
                      float(len(rows)) / self.train.responses_per_question]
        summed = distributed.all_sum(local)
        return [MiniBatchTotals(responses=max(summed[j], 1.0), tokens=max(summed[j + 1], 1.0),
                                groups=max(summed[j + 2], 1.0)) for j in range(0, len(summed), 3)]

    def run(self, groups: list[Group], position: int, anchor: float | None, metrics: StepMetrics,
            timer) -> float | None:
        """The whole update of one rollout step. Returns the objective's anchor (measured on
        its first step); the step reports how many groups had a pi_old pass of their own."""
        epochs = [self.mini_batches(order) for order in self.epoch_orders(groups, position)]
        pending = self.measures_anchor and anchor is None
        meter, old = EntropyMeter(keep_for_anchor=pending), OldLogProbs()
        separate = self.old_pass_rows(epochs[0], pending)
        with timer("old_logprobs"):
            self.old_logprobs(separate, meter, old)
            if pending:
                anchor = meter.anchor(self.needs.anchor)
        with timer("update"):
            # the first mini-batch measures pi_old in its own forward, unless the pass above took it
            self._loss_calls([mb for epoch in epochs for mb in epoch], meter, metrics, anchor, old,
                             first_measures_old=not pending)
        metrics.add_entropies(meter.sums, meter.tokens)
        metrics.add("perplexity", meter.perplexity_sum, meter.responses)
        metrics.totals["old_pass_groups"] += len({id(g) for g, _ in separate})
        return anchor

    def _loss_calls(self, mini_batches: list[list[Row]], meter: EntropyMeter, metrics: StepMetrics,
                    anchor: float | None, old: OldLogProbs, first_measures_old: bool) -> None:
        """Each mini-batch's loss calls, then one optimizer step. The calls before the first
        step measure pi_old (the policy still is pi_old there) where `first_measures_old`."""
        skipped, steps = 0, 0
        for mb, totals in zip(mini_batches, self.mini_batch_totals(mini_batches)):
            for rows in plan_calls(mb, self.plan):
                skipped += self._loss_call(rows, totals, meter, metrics, anchor, old,
                                           measures_old=first_measures_old and steps == 0)
            self.engine.step()
            steps += 1
        metrics.totals["skipped_updates"] += skipped
        metrics.maxima["skipped_step"] = float(skipped > 0)

    def _loss_call(self, rows: list[Row], totals: MiniBatchTotals, meter: EntropyMeter, metrics: StepMetrics,
                   anchor: float | None, old: OldLogProbs, measures_old: bool) -> int:
        """Forward, loss and backward of one call; returns 1 if its loss was
        not finite (then an exact zero is back-propagated instead). `measures_old`:
        pi_theta is still pi_old, so this forward gives the rows' pi_old log-probs."""
        if not rows:  # this rank has fewer rows than calls: take part in the gradient reduction only
            self._backward_zero()
            return 0
        packed = self.packed(rows)
        silent = self.silent(rows, measures_old)
        with torch.set_grad_enabled(not silent):
            out = evaluate_tokens(self.engine.module, packed, self.train.temperature,
                                  entropies=ENTROPIES if measures_old else self.needs.entropies,
                                  grad_entropies=self.needs.grad_entropies, topp=self.topp)
            tokens = float(response_tokens(rows))
            if measures_old:
                meter.add(out, packed.response_mask, tokens)
                old.keep(rows, out["logp"])
            batch = self.policy_batch(rows, packed, out, old.of(rows, out["logp"]), totals, anchor)
            result = self.loss_fn(batch, self.objective)
        metrics.totals["train_tokens"] += float(forward_tokens(rows))
        metrics.totals["train_padded_tokens"] += float(packed.input_ids.numel())
        metrics.totals["loss_calls"] += 1.0
        metrics.totals["silent_calls"] += float(silent)
        skipped = 0
        if silent:  # its gradient is exactly 0: measured, not back-propagated
            self._backward_zero()
        elif bool(torch.isfinite(result.loss)):  # the one host sync of a loss call
            # DeepSpeed averages gradients over the ranks; the calls' shares add
            # up to the mini-batch's loss over all ranks, so undo the average.
            self.engine.backward(result.loss * self.ranks.world, scale_wrt_gas=False)
        else:
            skipped = 1
            self._backward_zero()
        with torch.no_grad():
            kl = policy_kl(batch.logp, batch.old_logp, batch.mask)
        metrics.add("kl", kl * tokens, tokens)  # over the step's tokens, however they were cut into calls
        metrics.add("loss", result.loss.detach(), batch.share)  # the step's mean of mini-batch losses
        metrics.add_loss_call(result.metrics)
        return skipped

    def silent(self, rows: list[Row], on_policy: bool) -> bool:
        """The call's gradient is exactly zero before it is computed: every group in it has
        equal rewards and the objective declares such a group silent on this call
        (Needs.silent_uniform_groups); not where the ranks' calls are gathered (they must
        agree). Its forward still runs, without a graph, for pi_old and the metrics."""
        mode = self.needs.silent_uniform_groups
        if mode == "never" or (mode == "on_policy" and not on_policy) or self.plan.gathered:
            return False
        return all(min(g.rewards) == max(g.rewards) for g, _ in rows)

    def _backward_zero(self) -> None:
        """An exact zero gradient: the call still takes part in ZeRO's reduction."""
        self.engine.backward(sum(p.sum() for p in self.engine.module.parameters()) * 0.0, scale_wrt_gas=False)
