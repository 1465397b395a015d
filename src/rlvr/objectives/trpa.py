"""TRPA: Trust Region Preference Approximation (Su et al., arXiv 2504.04524).

A preference loss over a question's responses: each response's score is its
mean token log-ratio to the frozen reference model, every (better, worse)
pair of a group gives a logistic loss on the score difference, and a k3 KL to
the rollout policy keeps the update in a trust region.

The preference levels are the official DeepScaleR reward's, in DisCO's copy
(deepscaler/deepscaler/rewards/math_reward_pl.py lines 28-119, the reward
DisCO's TRPA rows used): 1 correct, 2 a wrong answer, 3 an empty answer
(`\\boxed{}`), 4 no answer (no `</think>`, no box);
rlvr.grading.grades.preference_level reads them off a grade. Every pair of
responses at two levels forms a pair, the lower level the winner, so
truncated and unanswered responses still pair, also in groups with no
correct answer.

As the official code (XueruiSu/Trust-Region-Preference-Approximation,
core_algos.py compute_pairwise_policy_loss lines 285-350, dp_actor.py lines
262-313): a pair whose winner is level 1 is weighted by anisotropy * beta,
the others by beta; pairs are averaged over the whole loss call; a call with
no pair falls back to -log sigmoid(+-score) per response (+ for level 1),
without beta.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from rlvr.objectives.base import (
    LossOutput,
    Needs,
    ObjectiveParams,
    PolicyBatch,
    gathered_token_mean,
    k3_kl,
    seq_mean,
)
from rlvr.objectives.registry import register
from rlvr.schema import AT_LEAST_0, POSITIVE, Range


@dataclass
class TrpaParams(ObjectiveParams):
    beta: float = 0.1  # the preference loss's inverse temperature (main_TRPA.sh line 12)
    anisotropy: float = 2.5  # extra weight of pairs won by a correct response (line 13)
    trust_region_coef: float = 1e-3  # weight of the k3 KL to pi_old (tr_kl_loss_coef, line 21)
    ranges: ClassVar[dict[str, Range]] = {"beta": POSITIVE, "anisotropy": POSITIVE, "trust_region_coef": AT_LEAST_0}

    def needs(self) -> Needs:
        # pairs are within a group, scores against the reference; pairs are averaged per loss call
        return Needs(whole_groups=True, reference_model=True, per_call=True)


def log_ratio_scores(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N] mean token log-prob under the policy minus the same under the reference."""
    return seq_mean(logp, mask) - seq_mean(ref_logp, mask)


def pair_losses(s: torch.Tensor, levels: torch.Tensor, group_size: int, beta: float, anisotropy: float):
    """-log sigmoid(h) summed over every pair of a group's responses at two
    levels, h = w (s_win - s_lose) with w = anisotropy * beta when the winner
    is level 1, else beta; and the number of pairs. All n x n differences of a
    group at once, masked, so no shape depends on the data (no host sync)."""
    sq, lq = s.view(-1, group_size), levels.view(-1, group_size)
    wins = (lq[:, :, None] < lq[:, None, :]).to(s.dtype)  # [G, win, lose]
    weight = torch.where(lq[:, :, None] == 1, anisotropy * beta, beta)
    h = weight * (sq[:, :, None] - sq[:, None, :])
    return (-F.logsigmoid(h) * wins).sum(), wins.sum()


@register("trpa", TrpaParams, examples=({},))
def trpa(batch: PolicyBatch, hp: TrpaParams) -> LossOutput:
    """Loss = -mean_pairs log sigmoid(w * (s_w - s_l))
            + trust_region_coef * token-mean k3 KL(pi || pi_old),

    s = seq_mean(log pi) - seq_mean(log pi_ref), w as pair_losses. Without any
    pair in the call: -mean_i log sigmoid(sign_i * s_i), sign +1 for level 1,
    -1 otherwise (the official fallback). Both terms are the call's means,
    weighted by its share of the mini-batch, as verl weighs a micro-batch's
    loss; with train.sequences_per_call the call is its rows on every rank,
    gathered. The levels are the batch's (`levels`), else correct (1) / wrong (2)."""
    if batch.ref_logp is None:
        raise ValueError("trpa needs reference log-probs (ref_logp)")
    s = batch.gathered(log_ratio_scores(batch.logp, batch.ref_logp, batch.mask))
    levels = batch.gathered(batch.preference_levels())
    pair_sum, pairs = pair_losses(s, levels, batch.group_size, hp.beta, hp.anisotropy)
    fallback = -F.logsigmoid(torch.where(levels == 1, s, -s)).mean()
    preference = torch.where(pairs > 0, pair_sum / pairs.clamp(min=1), fallback)
    # verl's low_var_kl: k3 of (pi_old - pi), clamped to [-10, 10]
    trust = gathered_token_mean(batch, torch.clamp(k3_kl(batch.logp, batch.old_logp), -10.0, 10.0))
    loss = batch.share * (preference + hp.trust_region_coef * trust)
    return LossOutput(loss, {"trpa_pairs": pairs.detach(),
                             "trpa_preference": preference.detach(), "trust_region_kl": trust.detach()})
