"""GRPO: group-normalized advantages, the PPO clip, sequence-mean then
batch-mean aggregation, and an optional k3 KL to a frozen reference."""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.objectives.base import (
    LossOutput,
    Needs,
    PolicyBatch,
    PolicyTermParams,
    advantages,
    k3_kl,
    policy_term,
    seq_mean_then_mean,
)
from rlvr.objectives.registry import register


@dataclass
class GRPOParams(PolicyTermParams):
    adv_eps: float = 1e-6  # added to the group's std before dividing
    kl_coef: float = 0.0  # k3 KL to a frozen reference; 0: no reference model

    def needs(self) -> Needs:
        return Needs(reference_model=self.kl_coef > 0)

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        if self.kl_coef < 0 or self.adv_eps < 0:
            problems.append(f"'{where}': kl_coef and adv_eps must be >= 0, got {self.kl_coef}, {self.adv_eps}")


@register("grpo", GRPOParams)
def grpo(batch: PolicyBatch, p: GRPOParams) -> LossOutput:
    """Group-normalized advantages, PPO clip, sequence-mean then batch-mean,
    optional k3 KL to a frozen reference (kl_coef)."""
    loss, metrics = policy_term(batch, advantages(batch, scale=True, eps=p.adv_eps), p, "seq-mean-token-mean")
    if p.kl_coef > 0:
        if batch.ref_logp is None:
            raise ValueError("grpo with kl_coef > 0 needs reference log-probs (ref_logp)")
        kl = seq_mean_then_mean(k3_kl(batch.logp, batch.ref_logp), batch.mask, batch.total_responses)
        loss = loss + p.kl_coef * kl
        metrics["kl_ref"] = kl.detach()
    return LossOutput(loss, metrics)
