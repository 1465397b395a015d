"""The GRPO family: GRPO, GRPO_RW, GRPO with an entropy bonus, Dr. GRPO, DAPO.

They share the PPO-clip policy term (base.policy_term) and differ in the
advantage and the aggregation, given to it as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.objectives.base import (
    LossOutput,
    Needs,
    PolicyBatch,
    PolicyTermParams,
    advantages,
    k3_kl,
    masked_sum,
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


def reweighted_advantages(rewards: torch.Tensor, n: int) -> torch.Tensor:
    """row_reweighted_advantages for whole groups (a group's rows contiguous)."""
    return row_reweighted_advantages(rewards, rewards.view(-1, n).repeat_interleave(n, dim=0))


def row_reweighted_advantages(rewards: torch.Tensor, group_rows: torch.Tensor) -> torch.Tensor:
    """GRPO_RW's advantages: (r_i - p) / (p (1 - p)) per group, p the group's
    accuracy (rewards read as correct when > 0.5); 0 for an all-equal group.
    `group_rows` [N, n]: each row's group's rewards.

    For binary rewards GRPO's (r_i - p) / sqrt(p (1 - p)) weighs each question
    by omega(p) = sqrt(p (1 - p)) relative to this (DisCO, Proposition 1):
    dividing once more by that weight removes the difficulty bias. A correct
    response gets +1/p, a wrong one -1/(1 - p)."""
    correct = (rewards > 0.5).float()
    p = (group_rows > 0.5).float().mean(dim=1)
    var = p * (1 - p)
    return torch.where(var > 0, (correct - p) / var.clamp(min=1e-12), torch.zeros_like(correct))


@register("grpo_rw", PolicyTermParams)
def grpo_rw(batch: PolicyBatch, p: PolicyTermParams) -> LossOutput:
    """GRPO with the question-level weight removed (DisCO's difficulty-bias
    ablation): reweighted advantages, PPO clip and aggregation as grpo."""
    adv = row_reweighted_advantages(batch.rewards, batch.group_rows())
    return LossOutput(*policy_term(batch, adv, p, "seq-mean-token-mean"))


@dataclass
class GRPOERParams(GRPOParams):
    entropy_coef: float = 0.0  # weight of the mean token entropy subtracted from the loss

    def needs(self) -> Needs:
        return Needs(entropies=frozenset({"entropy"}), grad_entropies=frozenset({"entropy"}),
                     reference_model=self.kl_coef > 0)


@register("grpo_er", GRPOERParams)
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


@register("dr_grpo", PolicyTermParams)
def dr_grpo(batch: PolicyBatch, p: PolicyTermParams) -> LossOutput:
    """Advantages without the std division; token losses summed and divided by
    the constant (number of responses * max response length). No KL. With
    dual_clip (SIREN's runs: 3, always on in verl's policy loss) negative
    advantages are capped."""
    if batch.max_response_len <= 0:
        raise ValueError("dr_grpo needs max_response_len > 0")
    return LossOutput(*policy_term(batch, advantages(batch, scale=False), p, "seq-mean-token-sum-norm"))


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
