"""DisCO: Discriminative Constrained Optimization (arXiv 2505.12366).

Score each response, push positive scores above negative ones per question
(basic: difference of means; DRO: a soft max over negatives), and keep the
policy in a trust region with a squared-hinge penalty on KL(pi_old || pi).
No clipping anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rlvr.objectives.base import LossOutput, Needs, ObjectiveParams, PolicyBatch, check_choice, policy_kl, seq_mean
from rlvr.objectives.registry import register


@dataclass
class DiscoParams(ObjectiveParams):
    score: str = "logl"  # the score of a response: logl (mean token log-likelihood) | lratio (likelihood ratio)
    form: str = "dro"  # dro (a soft max over negatives) | basic (difference of means)
    tau: float = 10.0  # the DRO form's temperature
    delta: float = 1e-4  # the KL bound of the trust region
    beta: float = 1e3  # the squared hinge's weight
    kl_estimator: str = "kl"  # kl | low_var_kl

    def needs(self) -> Needs:
        return Needs(whole_groups=True)  # the DRO/basic objective compares a question's responses

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        check_choice(where, "score", self.score, ("logl", "lratio"), problems)
        check_choice(where, "form", self.form, ("dro", "basic"), problems)
        check_choice(where, "kl_estimator", self.kl_estimator, ("kl", "low_var_kl"), problems)
        if self.tau <= 0:
            problems.append(f"'{where}.tau' must be > 0, got {self.tau}")


def scores(batch: PolicyBatch, score: str) -> torch.Tensor:
    """[N] mean token log-likelihood (log-L) or mean token likelihood ratio (L-ratio)."""
    if score == "logl":
        return seq_mean(batch.logp, batch.mask)
    if score == "lratio":
        return seq_mean(torch.exp(batch.logp - batch.old_logp), batch.mask)
    raise ValueError(f"disco score must be 'logl' or 'lratio', got '{score}'")


def question_objective(s: torch.Tensor, positive: torch.Tensor, form: str, tau: float) -> torch.Tensor:
    """J_q for one question (s: [n] scores, positive: [n] bool). 0 when the
    group has no positive or no negative."""
    pos, neg = s[positive], s[~positive]
    if pos.numel() == 0 or neg.numel() == 0:
        return s.sum() * 0.0  # keeps the graph (and device) without contributing
    if form == "basic":
        return pos.mean() - neg.mean()
    if form == "dro":
        # tau * log mean exp(s_j / tau), stably: logsumexp subtracts the max.
        return pos.mean() - tau * (torch.logsumexp(neg / tau, dim=0) - math.log(neg.numel()))
    raise ValueError(f"disco form must be 'basic' or 'dro', got '{form}'")


@register("disco", DiscoParams)
def disco(batch: PolicyBatch, hp: DiscoParams) -> LossOutput:
    """Loss = -(1/B) sum_q J_q + (beta/2) max(0, KL - delta)^2.

    Autograd of the squared hinge gives beta * max(0, KL - delta) * grad KL,
    the penalty gradient of the paper; B counts skipped questions too (the
    mini-batch's, `batch.total_groups`). Needs whole groups in a call. The KL
    hinge is taken per loss call, as the official code takes it per
    micro-batch, and weighted by the call's share of the mini-batch."""
    s = scores(batch, hp.score).view(-1, batch.group_size)
    positive = (batch.rewards > 0.5).view(-1, batch.group_size)
    j = torch.stack([question_objective(s[q], positive[q], hp.form, hp.tau) for q in range(s.shape[0])])
    kl = policy_kl(batch.logp, batch.old_logp, batch.mask, hp.kl_estimator)
    hinge = torch.clamp(kl - hp.delta, min=0.0)
    penalty = 0.5 * hp.beta * hinge**2
    loss = -j.sum() / batch.total_groups + batch.share * penalty
    return LossOutput(loss, {"disco_j": j.mean().detach(), "kl_penalty": penalty.detach(),
                             "kl_active": (hinge > 0).float().detach()})
