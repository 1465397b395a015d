"""Dr. GRPO: advantages without the std division, seq-mean-token-sum-norm, no KL."""

from __future__ import annotations

from rlvr.objectives.base import LossOutput, PolicyBatch, PolicyTermParams, advantages, policy_term
from rlvr.objectives.registry import register


@register("dr_grpo", PolicyTermParams)
def dr_grpo(batch: PolicyBatch, p: PolicyTermParams) -> LossOutput:
    """Advantages without the std division; token losses summed and divided by
    the constant (number of responses * max response length). No KL. With
    dual_clip (SIREN's runs: 3, always on in verl's policy loss) negative
    advantages are capped."""
    if batch.max_response_len <= 0:
        raise ValueError("dr_grpo needs max_response_len > 0")
    return LossOutput(*policy_term(batch, advantages(batch, scale=False), p, "seq-mean-token-sum-norm"))
