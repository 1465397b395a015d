"""DisCO: Discriminative Constrained Optimization (arXiv 2505.12366).

Score each response, push positive scores above negative ones per question
(basic: difference of means; DRO: a soft max over negatives), and keep the
policy in a trust region with a squared-hinge penalty on KL(pi_old || pi).
No clipping anywhere.

The paper's ablations are settings: `score: lratio_clipped` (the likelihood
ratio clipped as PPO clips it, pessimistically for the response's sign),
`constraint: penalty` (a plain KL penalty instead of the trust-region
constraint), `form: basic` (a difference of means instead of DRO).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from rlvr.objectives.base import (
    LossOutput,
    Needs,
    ObjectiveParams,
    PolicyBatch,
    check_choice,
    gathered_token_mean,
    policy_kl_tokens,
    seq_mean,
)
from rlvr.objectives.registry import register
from rlvr.schema import AT_LEAST_0, OPEN_FRACTION, POSITIVE, Range


@dataclass
class DiscoParams(ObjectiveParams):
    score: str = "logl"  # the score of a response: logl (mean token log-likelihood) | lratio (likelihood ratio)
                         # | lratio_clipped (the ratio clipped to [1 - clip_eps, 1 + clip_eps], PPO's way)
    clip_eps: float = 0.2  # lratio_clipped's clip (verl's clip_ratio, DisCO's ppo_trainer.yaml)
    form: str = "dro"  # dro (a soft max over negatives) | basic (difference of means)
    tau: float = 10.0  # the DRO form's temperature
    delta: float = 1e-4  # the KL bound of the trust region
    beta: float = 1e3  # the squared hinge's weight
    kl_estimator: str = "kl"  # kl | low_var_kl
    constraint: str = "hinge"  # hinge: (beta/2) max(0, KL - delta)^2 | penalty: kl_penalty_coef * KL (the ablation)
    kl_penalty_coef: float = 1e-3  # the penalty's weight (verl's kl_loss_coef default, in DisCO's config)
    ranges: ClassVar[dict[str, Range]] = {"clip_eps": OPEN_FRACTION, "tau": POSITIVE, "delta": AT_LEAST_0,
                                          "beta": AT_LEAST_0, "kl_penalty_coef": AT_LEAST_0}

    def needs(self) -> Needs:
        # the DRO/basic objective compares a question's responses; the constraint is the loss call's
        constrained = self.beta > 0 if self.constraint == "hinge" else self.kl_penalty_coef > 0
        # a group with no positive or no negative has J_q = 0; the squared hinge is 0 with a zero gradient
        # at KL 0 (pi = pi_old), a plain penalty's gradient is not
        silent = "on_policy" if self.constraint == "hinge" or not constrained else "never"
        return Needs(whole_groups=True, per_call=constrained, silent_uniform_groups=silent)

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        check_choice(where, "score", self.score, ("logl", "lratio", "lratio_clipped"), problems)
        check_choice(where, "constraint", self.constraint, ("hinge", "penalty"), problems)
        check_choice(where, "form", self.form, ("dro", "basic"), problems)
        check_choice(where, "kl_estimator", self.kl_estimator, ("kl", "low_var_kl"), problems)


def scores(batch: PolicyBatch, score: str, clip_eps: float = 0.2) -> torch.Tensor:
    """[N] mean token log-likelihood (log-L), mean token likelihood ratio
    (L-ratio), or the ratio clipped per token as PPO's surrogate clips it: a
    positive response's ratio min(r, clip(r)), a negative's max(r, clip(r)),
    so a ratio outside the clip no longer moves the score."""
    if score == "logl":
        return seq_mean(batch.logp, batch.mask)
    ratio = torch.exp(batch.logp - batch.old_logp)
    if score == "lratio":
        return seq_mean(ratio, batch.mask)
    if score == "lratio_clipped":
        clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
        positive = (batch.rewards > 0.5).unsqueeze(-1)
        return seq_mean(torch.where(positive, torch.minimum(ratio, clipped), torch.maximum(ratio, clipped)),
                        batch.mask)
    raise ValueError(f"disco score must be 'logl', 'lratio' or 'lratio_clipped', got '{score}'")


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


@register("disco", DiscoParams, examples=(
    {"score": "logl", "form": "dro", "tau": 10.0, "delta": 1e-4, "beta": 1e3},  # disco_logl (DisCO's scripts)
    {"score": "lratio", "form": "dro", "tau": 1.0},  # disco_lratio
    {"score": "logl", "form": "basic"},  # DisCO-b
    {"score": "lratio_clipped"}, {"constraint": "penalty"},  # the paper's ablations
    {"beta": 0.0},  # the discriminative objective alone
))
def disco(batch: PolicyBatch, hp: DiscoParams) -> LossOutput:
    """Loss = -(1/B) sum_q J_q + (beta/2) max(0, KL - delta)^2
    (the ablation `constraint: penalty`: + kl_penalty_coef * KL instead).

    Autograd of the squared hinge gives beta * max(0, KL - delta) * grad KL,
    the penalty gradient of the paper; B counts skipped questions too (the
    mini-batch's, `batch.total_groups`). Needs whole groups in a call: this
    rank's, or, with train.sequences_per_call, the call's rows on every rank,
    gathered (the official code all-gathers each micro-batch's log-probs,
    core_algos.py lines 262-267). The KL hinge is taken per loss call, over
    every token of the (gathered) call as the official code takes it per
    micro-batch, and weighted by the call's share of the mini-batch."""
    s = batch.gathered(scores(batch, hp.score, hp.clip_eps)).view(-1, batch.group_size)
    positive = (batch.gathered(batch.rewards) > 0.5).view(-1, batch.group_size)
    j = torch.stack([question_objective(s[q], positive[q], hp.form, hp.tau) for q in range(s.shape[0])])
    kl = gathered_token_mean(batch, policy_kl_tokens(batch.logp, batch.old_logp, hp.kl_estimator))
    hinge = torch.clamp(kl - hp.delta, min=0.0)
    penalty = 0.5 * hp.beta * hinge**2 if hp.constraint == "hinge" else hp.kl_penalty_coef * kl
    loss = (-j.sum() / batch.total_groups + batch.share * batch.gather_ranks * penalty) / batch.gather_ranks
    return LossOutput(loss, {"disco_j": j.mean().detach(), "kl_penalty": penalty.detach(),
                             "kl_active": (hinge > 0).float().detach()})

