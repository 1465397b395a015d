"""Naive entropy regularization, one of SIREN's entropy baselines.

Shared by SIREN's entropy baselines (entropy_reg, clip_cov, kl_cov,
entropy_adv, forking_80_20), as Linn3a/siren runs them
(verl/verl/workers/actor/dp_actor.py, one branch per `experiment_type`, and
verl/verl/trainer/ppo/core_algos.py): Dr. GRPO advantages
(norm_adv_by_std_in_grpo=False), the PPO clip at 0.2 / 0.2 with the dual clip
(3.0, always on) where the official loss applies it, and seq-mean-token-sum-norm,
whose denominator keeps the tokens a method drops. "Batch" means one loss
call, as the official micro-batch (a 4096-token dynamic-batch bin): covariance
centring, token budgets and quantiles are per call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rlvr.objectives.base import ENTROPY, LossOutput, Needs, PolicyBatch, need_entropy
from rlvr.objectives.policy_term import DrGRPOTermParams, aggregate, policy_term
from rlvr.objectives.registry import register
from rlvr.schema import AT_LEAST_0, Range


@dataclass
class EntropyRegParams(DrGRPOTermParams):
    entropy_coef: float = 0.0  # weight of the entropy bonus (official: 0.005)
    ranges: ClassVar[dict[str, Range]] = {**DrGRPOTermParams.ranges, "entropy_coef": AT_LEAST_0}

    def needs(self) -> Needs:
        return Needs(entropies=ENTROPY, grad_entropies=ENTROPY)


@register("entropy_reg", EntropyRegParams, examples=({"entropy_coef": 0.005, "dual_clip": 3.0},))
def entropy_reg(batch: PolicyBatch, hp: EntropyRegParams) -> LossOutput:
    """Naive entropy regularization (experiment_type 'naive_entropy_reg', use_siren=False).

        loss = P - entropy_coef * sum_{i,t} m_it H_it / (N * max_response_len)

    P is Dr. GRPO's policy term: -min(rho A, clip(rho) A), dual clip c = hp.dual_clip
    for A < 0, aggregated seq-mean-token-sum-norm. H is the FULL-vocabulary token
    entropy of the current policy (logits / rollout temperature) and carries gradient;
    the bonus uses the same aggregation as the policy term (the official
    entropy_agg_mode is set to loss_agg_mode for 'naive*' types). Official
    coefficient: the script's entropy_coeff = 0.005.
    """
    h = need_entropy(batch, "entropy_reg")
    policy, metrics = policy_term(batch, hp)
    bonus = aggregate(h, batch.mask, hp.aggregation, batch)
    return LossOutput(policy - hp.entropy_coef * bonus, {**metrics, "entropy_bonus": bonus.detach()})
