"""DAPO's loss: clip-higher, the dual clip, token-level aggregation, no KL
(its reward shaping and dynamic sampling act on the rollouts)."""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.objectives.base import LossOutput, PolicyBatch, PolicyTermParams, advantages, policy_term
from rlvr.objectives.registry import register


@dataclass
class DAPOParams(PolicyTermParams):
    adv_eps: float = 1e-6  # added to the group's std before dividing


@register("dapo", DAPOParams)
def dapo(batch: PolicyBatch, p: DAPOParams) -> LossOutput:
    """Clip-higher (1 - clip_low, 1 + clip_high), dual clip (verl's DAPO recipe:
    c = 10), token-level aggregation, no KL.

    Token level means one division for the whole mini-batch: the summed token
    losses over the number of real tokens of every call on every rank
    (`batch.total_tokens`), so the calls add up to the mini-batch's token mean.
    Dynamic sampling and overlong shaping act on the rollouts (rlvr.rollout_groups)."""
    return LossOutput(*policy_term(batch, advantages(batch, scale=True, eps=p.adv_eps), p, "token-mean"))
