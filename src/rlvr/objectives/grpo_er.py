"""GRPO with an entropy bonus (the full-vocabulary token entropy, with gradient)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rlvr.objectives.base import LossOutput, Needs, PolicyBatch, masked_sum
from rlvr.objectives.grpo import GRPOParams, grpo
from rlvr.objectives.registry import register
from rlvr.schema import AT_LEAST_0, Range


@dataclass
class GRPOERParams(GRPOParams):
    entropy_coef: float = 0.0  # weight of the mean token entropy subtracted from the loss
    ranges: ClassVar[dict[str, Range]] = {**GRPOParams.ranges, "entropy_coef": AT_LEAST_0}

    def needs(self) -> Needs:
        return Needs(entropies=frozenset({"entropy"}), grad_entropies=frozenset({"entropy"}),
                     reference_model=self.kl_coef > 0)


@register("grpo_er", GRPOERParams, examples=({"entropy_coef": 0.01},))
def grpo_er(batch: PolicyBatch, p: GRPOERParams) -> LossOutput:
    """GRPO minus entropy_coef * mean token entropy (full vocabulary; the mean
    over the mini-batch's real tokens)."""
    if batch.entropy is None:
        raise ValueError("grpo_er needs the full-vocabulary token entropy (entropy)")
    out = grpo(batch, p)
    ent = masked_sum(batch.entropy, batch.mask) / batch.total_tokens
    out.loss = out.loss - p.entropy_coef * ent
    out.metrics["entropy_bonus"] = ent.detach()
    return out
