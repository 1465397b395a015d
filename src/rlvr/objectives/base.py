"""What every objective shares: the batch it sees, masked reductions, advantages.

Shapes: N responses (rows), T = padded response length. Every tensor is over
response tokens only; `mask` is 1 for a real token and 0 for padding. A batch
is one loss call: whole groups (G questions x n responses, a question's
responses contiguous) or, for objectives that need no whole group, any rows,
each carrying its group's rewards (`group_rewards`) for its advantage.

A loss call returns its share of the mini-batch's loss: batch-level means
divide by the mini-batch's totals over every call and rank (`totals`), so the
calls of an optimizer step add up to the same loss however the mini-batch is
cut into calls and ranks. Without `totals` the batch is the whole mini-batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from rlvr.config import unknown_name


# ---- what an objective is configured with, and what it needs ------------------


@dataclass(frozen=True)
class Needs:
    """What the trainer computes for an objective's loss besides log-probs."""

    entropies: frozenset[str] = frozenset()  # per-token entropies in the batch: "entropy", "topp_entropy"
    grad_entropies: frozenset[str] = frozenset()  # those of them that carry gradient into the loss
    # the nucleus of "topp_entropy" (also measured, without gradient, as a metric for every objective)
    topp: tuple[float, int] = (0.8, 10000)
    # the loss couples a question's responses through the policy (DisCO's scores):
    # every loss call holds whole groups. Otherwise a row carries its group's rewards.
    whole_groups: bool = False
    reference_model: bool = False  # a frozen copy of the initial policy (ref_logp)
    # a constant measured once, on the first step, from the entropies of all its
    # rollouts on every rank (SIREN's H_anchor): ({name: [N, T]}, mask) -> value
    anchor: Callable[[dict[str, torch.Tensor], torch.Tensor], float] | None = None


@dataclass
class ObjectiveParams:
    """Settings every objective has. A `methods:` entry in params sets its
    objective's dataclass (a subclass), keys the trainer does not own."""

    objective: str = "grpo"  # a registered name (rlvr.objectives.registry)
    # the rewards the objective sees (read by the rollout side, rlvr.rollout_groups)
    incorrect_reward: float = 0.0  # reward of a wrong answer; DAPO: -1 (its reward is +1 / -1)
    dynamic_sampling: bool = False  # DAPO: drop groups whose accuracies are all equal, refill from new questions
    dynamic_sampling_rounds: int = 3  # extra rollout rounds at most per step
    overlong_buffer: int = 0  # DAPO's soft overlong punishment over the last this many tokens (0 = off)

    def needs(self) -> Needs:
        return Needs()

    def check(self, where: str, problems: list[str]) -> None:
        """Append a line per problem (`where`: the method's params path)."""
        if self.dynamic_sampling_rounds < 0:
            problems.append(f"'{where}.dynamic_sampling_rounds' must be >= 0, got {self.dynamic_sampling_rounds}")


def check_choice(where: str, key: str, value, valid: tuple, problems: list[str]) -> None:
    if value not in valid:
        problems.append(unknown_name(f"{where}.{key}", value, valid, what="value"))


@dataclass
class PolicyTermParams(ObjectiveParams):
    """The PPO-clip policy term's settings (policy_term)."""

    clip_low: float = 0.2  # rho is clipped to [1 - clip_low, 1 + clip_high]
    clip_high: float = 0.2  # DAPO's clip-higher: 0.28
    dual_clip: float | None = None  # cap for negative advantages: SIREN 3, DAPO (verl recipe) 10

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        if self.clip_low < 0 or self.clip_high < 0:
            problems.append(f"'{where}': clip_low and clip_high must be >= 0, got {self.clip_low}, {self.clip_high}")
        if self.dual_clip is not None and self.dual_clip <= 1:
            problems.append(f"'{where}.dual_clip' must be > 1 (or null: off), got {self.dual_clip}")


@dataclass(frozen=True)
class MiniBatchTotals:
    """An optimizer step's counts over all its loss calls on every rank."""

    responses: float
    tokens: float  # real response tokens
    groups: float  # questions; only whole-group objectives read it


@dataclass
class PolicyBatch:
    logp: torch.Tensor  # [N, T] log pi_theta of the sampled tokens (carries grad)
    old_logp: torch.Tensor  # [N, T] log pi_old, recomputed by the trainer
    mask: torch.Tensor  # [N, T] float, 1 = real response token
    rewards: torch.Tensor  # [N]
    group_size: int  # n
    group_rewards: torch.Tensor | None = None  # [N, n] each row's group's rewards; None: rows are whole groups
    max_response_len: int = 0  # Dr. GRPO's constant normalizer
    ref_logp: torch.Tensor | None = None  # [N, T] frozen reference (GRPO's optional KL)
    entropy: torch.Tensor | None = None  # [N, T] full-vocabulary entropy (carries grad)
    topp_entropy: torch.Tensor | None = None  # [N, T] SIREN's top-p entropy (carries grad)
    entropy_anchor: float | None = None  # SIREN's H_anchor
    totals: MiniBatchTotals | None = None  # the mini-batch's counts; None: this batch is the mini-batch

    @property
    def total_responses(self) -> float:
        return self.totals.responses if self.totals is not None else float(self.mask.shape[0])

    @property
    def total_tokens(self) -> float | torch.Tensor:
        return self.totals.tokens if self.totals is not None else self.mask.sum().clamp(min=1)

    @property
    def total_groups(self) -> float:
        return self.totals.groups if self.totals is not None else float(self.mask.shape[0] // self.group_size)

    @property
    def share(self) -> float:
        """This call's share of the mini-batch's responses: the weight of a term
        the official code takes per loss call (SIREN's anchor term, DisCO's KL
        hinge), as verl weighs a micro-batch's loss by its rows."""
        return self.mask.shape[0] / self.total_responses

    def group_rows(self) -> torch.Tensor:
        """[N, n]: the rewards of each row's group."""
        if self.group_rewards is not None:
            return self.group_rewards
        return self.rewards.view(-1, self.group_size).repeat_interleave(self.group_size, dim=0)


@dataclass
class LossOutput:
    loss: torch.Tensor
    # 0-dim detached tensors on the loss's device: the trainer reads them once
    # per step, since reading one (.item()) per loss call is a host sync on a GPU
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    return (x * mask).sum() if dim is None else (x * mask).sum(dim)


def token_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over every real token of the batch (DAPO's token-level aggregation)."""
    return masked_sum(x, mask) / mask.sum().clamp(min=1)


def seq_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per response: mean over its real tokens ([N]); an empty response gives 0."""
    return masked_sum(x, mask, -1) / mask.sum(-1).clamp(min=1)


def seq_mean_then_mean(x: torch.Tensor, mask: torch.Tensor, responses: float | None = None) -> torch.Tensor:
    """GRPO's aggregation: mean over a response's tokens, then over the
    `responses` of the mini-batch (default: this batch's rows)."""
    return seq_mean(x, mask).sum() / (responses if responses is not None else x.shape[0])


def seq_sum_norm(x: torch.Tensor, mask: torch.Tensor, max_response_len: int,
                 responses: float | None = None) -> torch.Tensor:
    """verl's seq-mean-token-sum-norm (Dr. GRPO, SIREN and its baselines): the sum
    over every real token divided by the constant (number of responses * max
    response length), so a response's weight does not depend on its length and
    padding or masked-out tokens still count in the denominator. `responses`:
    the mini-batch's (default: this batch's rows)."""
    if max_response_len <= 0:
        raise ValueError("seq-mean-token-sum-norm needs max_response_len > 0")
    return masked_sum(x, mask) / ((responses if responses is not None else x.shape[0]) * max_response_len)


def row_advantages(rewards: torch.Tensor, group_rows: torch.Tensor, scale: bool = True,
                   eps: float = 1e-6) -> torch.Tensor:
    """A_i = r_i - mean_group(r), divided by (std_group(r) + eps) when `scale`;
    `group_rows` [N, n] holds each row's group's rewards, so a row needs no
    other row of its group in the same loss call.

    std is the sample std (n - 1), as in GRPO's reference code. A group whose
    rewards are all equal gets A = 0 for every member.
    """
    g = group_rows.float()
    centered = rewards.float() - g.mean(dim=1)
    if scale:
        std = g.std(dim=1)
        # an all-equal group is 0 / 0: define it as 0 whatever eps is
        centered = torch.where(std > 0, centered / (std + eps), torch.zeros_like(centered))
    return centered


def group_advantages(rewards: torch.Tensor, n: int, scale: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """row_advantages for whole groups: `rewards` [G * n], a group's rows contiguous."""
    return row_advantages(rewards, rewards.view(-1, n).repeat_interleave(n, dim=0), scale, eps)


def advantages(batch: PolicyBatch, scale: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """The batch's per-row group advantages (whole groups or single rows)."""
    return row_advantages(batch.rewards, batch.group_rows(), scale, eps)


# verl's names for how token losses become the loss (core_algos.agg_loss)
AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def aggregate(x: torch.Tensor, mask: torch.Tensor, mode: str, batch: PolicyBatch) -> torch.Tensor:
    """Token values [N, T] to this call's share of the mini-batch's loss:
    'token-mean' divides the sum by the mini-batch's real tokens (DAPO),
    'seq-mean-token-mean' averages each response, then the responses (GRPO),
    'seq-mean-token-sum-norm' divides the sum by responses x max length (Dr. GRPO, SIREN)."""
    if mode == "token-mean":
        return masked_sum(x, mask) / batch.total_tokens
    if mode == "seq-mean-token-mean":
        return seq_mean_then_mean(x, mask, batch.total_responses)
    if mode == "seq-mean-token-sum-norm":
        return seq_sum_norm(x, mask, batch.max_response_len, batch.total_responses)
    raise ValueError(f"unknown aggregation '{mode}'; valid: {', '.join(AGGREGATIONS)}")


def policy_term(batch: PolicyBatch, adv: torch.Tensor, p: PolicyTermParams, mode: str,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The PPO-clip policy loss every clipped objective shares: advantages `adv`
    ([N] or per token [N, T]), the clip and dual clip of `p`, aggregated by
    `mode` over `mask` (default: the real tokens). Returns the loss and its
    clip fraction (over the same tokens)."""
    mask = batch.mask if mask is None else mask
    per_token, clipped = clipped_policy_loss(batch.logp, batch.old_logp, adv, p.clip_low, p.clip_high,
                                             dual_clip=p.dual_clip)
    return aggregate(per_token, mask, mode, batch), {"clip_frac": token_mean(clipped.float(), mask).detach()}


ENTROPY = frozenset({"entropy"})  # the full-vocabulary token entropy


def need_entropy(batch: PolicyBatch, name: str) -> torch.Tensor:
    if batch.entropy is None:
        raise ValueError(f"{name} needs the full-vocabulary token entropy (entropy)")
    return batch.entropy


def token_share(selected: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The share of real tokens `selected` marks (a detached metric)."""
    return token_mean(selected.float(), mask).detach()


def token_covariance(adv: torch.Tensor, logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cui et al.'s per-token covariance term ([N, T], no gradient):

        cov_it = (A_i - mean(A)) * (log p_it - mean(log p)),

    both means over every real token of the batch (a response's advantage
    counts once per real token). Padding is set to -inf so it is never selected.
    """
    with torch.no_grad():
        a = adv.unsqueeze(-1).expand_as(logp).float()
        lp = logp.detach().float()
        cov = (a - token_mean(a, mask)) * (lp - token_mean(lp, mask))
        return cov.masked_fill(mask <= 0, float("-inf"))


def clipped_policy_loss(logp, old_logp, adv, clip_low: float, clip_high: float, dual_clip: float | None = None):
    """Per-token PPO-clip loss -min(rho A, clip(rho, 1-cl, 1+ch) A) ([N, T]), and
    which tokens were clipped. With `dual_clip` c, a negative-advantage token's
    loss is capped at -c A (the dual-clip PPO bound). `adv` is per response ([N])
    or per token ([N, T], e.g. an entropy-shaped advantage)."""
    ratio = torch.exp(logp - old_logp)
    a = adv if adv.dim() == logp.dim() else adv.unsqueeze(-1)
    unclipped = -ratio * a
    clipped = -torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * a
    loss = torch.maximum(unclipped, clipped)
    was_clipped = clipped > unclipped
    if dual_clip is not None:
        cap = -dual_clip * a
        capped = (a < 0) & (loss > cap)
        loss = torch.where(a < 0, torch.minimum(loss, cap), loss)
        was_clipped = was_clipped | capped
    return loss, was_clipped


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """The k3 estimator of KL(pi || ref) per token: exp(ref - logp) - (ref - logp) - 1."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def policy_kl(logp, old_logp, mask, estimator: str = "kl") -> torch.Tensor:
    """KL(pi_old || pi_theta) over all real tokens, DisCO's constraint.

    'kl': mean of (log p_old - log p); 'low_var_kl': mean of (rho - 1) - log rho.
    """
    if estimator == "kl":
        per_token = old_logp - logp
    elif estimator == "low_var_kl":
        log_rho = logp - old_logp
        per_token = torch.exp(log_rho) - 1 - log_rho
    else:
        raise ValueError(f"kl_estimator must be 'kl' or 'low_var_kl', got '{estimator}'")
    return token_mean(per_token, mask)
