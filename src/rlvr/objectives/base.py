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
from typing import Callable, ClassVar

import torch

from rlvr.schema import Range, check_ranges, unknown_name

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
    # a term taken per loss call, the official grain (DisCO's KL hinge, SIREN's regularizer,
    # Clip-Cov's budget): how a mini-batch is cut into calls changes the loss. Otherwise the
    # calls of a mini-batch add up to its loss however it is cut.
    per_call: bool = False
    # when a group whose rewards are all equal adds exactly zero gradient, so that its loss
    # call may run without one (the update still measures it): "always" (the policy term
    # alone: every advantage of the group is 0), "on_policy" (only while the policy still is
    # pi_old: DisCO, whose discriminative term is 0 there and whose KL hinge is 0 at KL 0),
    # "never" (another term reads every response: an entropy bonus, a KL to a reference)
    silent_uniform_groups: str = "never"


@dataclass
class ObjectiveParams:
    """Settings every objective has. A `methods:` entry in params sets its
    objective's dataclass (a subclass), keys the trainer does not own."""

    objective: str = "grpo"  # a registered name (rlvr.objectives.registry)
    # the range of every numeric setting (tests/settings/test_ranges.py: none without one); a subclass adds its own
    ranges: ClassVar[dict[str, Range]] = {}

    def needs(self) -> Needs:
        return Needs()

    def check(self, where: str, problems: list[str]) -> None:
        """Append a line per problem (`where`: the method's params path)."""
        check_ranges(self, self.ranges, problems, where=lambda key: f"{where}.{key}")


def check_choice(where: str, key: str, value, valid: tuple, problems: list[str]) -> None:
    if value not in valid:
        problems.append(unknown_name(f"{where}.{key}", value, valid, what="value"))


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
    # The rows of this call on every rank, in order (rlvr.distributed.gather_rows: differentiable); None: this
    # rank's call is the whole call. A loss that compares a group's responses reads them through `gathered`.
    gather: Callable[[torch.Tensor], torch.Tensor] | None = None
    gather_ranks: int = 1  # the ranks whose calls `gather` joins
    # [N] each response's preference level (1 correct, 2 wrong, 3 empty answer, 4 no answer: TRPA's);
    # None: from the rewards (1 correct, 2 wrong)
    levels: torch.Tensor | None = None

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

    def gathered(self, x: torch.Tensor) -> torch.Tensor:
        """Per-row values ([rows, ...]) of the whole call across the ranks that
        hold it, in the mini-batch's order (this rank's own without a gather).
        Every rank computes the same loss of them; a loss built on them returns
        its value divided by `gather_ranks`, each rank's share."""
        return x if self.gather is None else self.gather(x)

    def preference_levels(self) -> torch.Tensor:
        """[N] levels: the batch's, else 1 for a rewarded response and 2 for the others."""
        if self.levels is not None:
            return self.levels
        return torch.where(self.rewards > 0.5, 1, 2)

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


def gathered_token_mean(batch: PolicyBatch, x: torch.Tensor) -> torch.Tensor:
    """The mean of token values `x` ([N, T]) over every real token of the call,
    on every rank that holds it (PolicyBatch.gathered); an empty call gives 0."""
    total = batch.gathered(masked_sum(x, batch.mask).reshape(1)).sum()
    return total / batch.gathered(batch.mask.sum().reshape(1)).sum().clamp(min=1)


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


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """The k3 estimator of KL(pi || ref) per token: exp(ref - logp) - (ref - logp) - 1."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def policy_kl_tokens(logp, old_logp, estimator: str = "kl") -> torch.Tensor:
    """Per-token estimates of KL(pi_old || pi_theta) ([N, T]): 'kl' is
    log p_old - log p; 'low_var_kl' is (rho - 1) - log rho."""
    if estimator == "kl":
        return old_logp - logp
    if estimator == "low_var_kl":
        log_rho = logp - old_logp
        return torch.exp(log_rho) - 1 - log_rho
    raise ValueError(f"kl_estimator must be 'kl' or 'low_var_kl', got '{estimator}'")


def policy_kl(logp, old_logp, mask, estimator: str = "kl") -> torch.Tensor:
    """KL(pi_old || pi_theta) over all real tokens (DisCO's constraint, the step's kl metric)."""
    return token_mean(policy_kl_tokens(logp, old_logp, estimator), mask)
