"""GRPO_RW: GRPO without its question weight (DisCO's difficulty-bias ablation)."""

from __future__ import annotations

import torch

from rlvr.objectives.base import LossOutput, PolicyBatch, PolicyTermParams, policy_term
from rlvr.objectives.registry import register


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
