"""The GRPO family: one clipped policy loss (rlvr.objectives.policy_term) and
an optional k3 KL to a frozen reference, registered under four names whose
settings differ only in their defaults:

- grpo: group-normalized advantages, sequence-mean then batch-mean
- grpo_rw: DisCO's reweighted advantages (its difficulty-bias ablation)
- dr_grpo: advantages without the std division, seq-mean-token-sum-norm
- dapo: DAPO's loss side, token-level aggregation (its clip-higher and dual
  clip are settings; its reward shaping and dynamic sampling act on the
  rollouts, `train:` settings)

Other members are params, not modules: GSPO is `objective: grpo` with
`ratio: sequence`, `clip_low: 3.0e-4`, `clip_high: 4.0e-4` (verl's gspo recipe).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rlvr.objectives.base import LossOutput, Needs, PolicyBatch, k3_kl, seq_mean_then_mean
from rlvr.objectives.policy_term import PolicyTermParams, policy_term
from rlvr.objectives.registry import register
from rlvr.schema import AT_LEAST_0, Range


@dataclass
class GRPOParams(PolicyTermParams):
    kl_coef: float = 0.0  # k3 KL to a frozen reference; 0: no reference model
    ranges: ClassVar[dict[str, Range]] = {**PolicyTermParams.ranges, "kl_coef": AT_LEAST_0}

    def needs(self) -> Needs:
        reference = self.kl_coef > 0  # a KL to the reference reads every response
        return Needs(reference_model=reference, silent_uniform_groups="never" if reference else "always")


@dataclass
class GRPORWParams(GRPOParams):
    advantage: str = "grpo_rw"


@dataclass
class DrGRPOParams(GRPOParams):
    advantage: str = "dr_grpo"
    aggregation: str = "seq-mean-token-sum-norm"


@dataclass
class DAPOParams(GRPOParams):
    aggregation: str = "token-mean"


GSPO = {"ratio": "sequence", "clip_low": 3e-4, "clip_high": 4e-4}


@register("grpo", GRPOParams, examples=({}, {"kl_coef": 0.05}, GSPO))
@register("grpo_rw", GRPORWParams, examples=({},))
@register("dr_grpo", DrGRPOParams, examples=({"dual_clip": 3.0},))
@register("dapo", DAPOParams, examples=({"clip_high": 0.28, "dual_clip": 10.0},))
def grpo(batch: PolicyBatch, p: GRPOParams) -> LossOutput:
    """The policy term of p's parts, plus kl_coef x the k3 KL to the frozen
    reference (sequence-mean then batch-mean, as GRPO's)."""
    loss, metrics = policy_term(batch, p)
    if p.kl_coef > 0:
        if batch.ref_logp is None:
            raise ValueError(f"{p.objective} with kl_coef > 0 needs reference log-probs (ref_logp)")
        kl = seq_mean_then_mean(k3_kl(batch.logp, batch.ref_logp), batch.mask, batch.total_responses)
        loss = loss + p.kl_coef * kl
        metrics["kl_ref"] = kl.detach()
    return LossOutput(loss, metrics)
