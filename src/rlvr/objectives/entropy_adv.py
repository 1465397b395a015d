"""Entropy-based advantage shaping (Cheng et al. 2025), one of SIREN's entropy
baselines (see entropy_reg.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from rlvr.objectives.advantages import advantages
from rlvr.objectives.base import ENTROPY, LossOutput, Needs, PolicyBatch, need_entropy, token_mean
from rlvr.objectives.policy_term import DrGRPOTermParams, policy_term
from rlvr.objectives.registry import register
from rlvr.schema import AT_LEAST_0, POSITIVE, Range


@dataclass
class EntropyAdvParams(DrGRPOTermParams):
    entropy_adv_alpha: float = 0.4  # A + min(alpha * H.detach(), |A| / kappa)
    entropy_adv_kappa: float = 1.0  # SIREN's code uses 1 (Cheng et al. require kappa > 1)
    ranges: ClassVar[dict[str, Range]] = {**DrGRPOTermParams.ranges, "entropy_adv_alpha": AT_LEAST_0,
                                          "entropy_adv_kappa": POSITIVE}

    def needs(self) -> Needs:
        return Needs(entropies=ENTROPY)  # read only: it shapes the advantage


@register("entropy_adv", EntropyAdvParams, examples=({"dual_clip": 3.0},))
def entropy_adv(batch: PolicyBatch, hp: EntropyAdvParams) -> LossOutput:
    """Entropy-based advantage shaping (Cheng et al.; experiment_type 'baseline_entropy_adv').

        A'_it = A_i + min(entropy_adv_alpha * stopgrad(H_it), |A_i| / entropy_adv_kappa)

    then Dr. GRPO's clipped loss with A' (dual clip c = hp.dual_clip applies where
    A' < 0), aggregated seq-mean-token-sum-norm. H is the full-vocabulary entropy of
    the current policy, DETACHED: the entropy term only rescales the advantage and
    carries no gradient. The bonus is >= 0 and at most |A| / kappa, so for kappa >= 1
    A' keeps A's sign, and A = 0 (an all-equal group) gets no bonus. Official values:
    alpha 0.4 (config adv_alpha), kappa hard-coded to 1 in SIREN's code (Cheng et al.
    state kappa > 1).
    """
    if hp.entropy_adv_kappa <= 0:
        raise ValueError(f"entropy_adv_kappa must be > 0, got {hp.entropy_adv_kappa}")
    h = need_entropy(batch, "entropy_adv").detach()
    adv = advantages(batch, hp.advantage, hp.adv_eps).unsqueeze(-1)
    bonus = torch.minimum(hp.entropy_adv_alpha * h, adv.abs() / hp.entropy_adv_kappa)
    loss, metrics = policy_term(batch, hp, adv=adv + bonus)
    return LossOutput(loss, {**metrics, "entropy_adv_bonus": token_mean(bonus, batch.mask).detach()})
