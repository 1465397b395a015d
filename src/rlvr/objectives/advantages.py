"""Advantage estimators by name (`advantage:` of an objective with a policy
term), as verl keeps its estimators apart from its policy losses: each reads
a row's reward and its group's rewards, so a row needs no other row of its
group in the same loss call."""

from __future__ import annotations

from typing import Callable

import torch

from rlvr.objectives.base import PolicyBatch


def row_advantages(rewards: torch.Tensor, group_rows: torch.Tensor, scale: bool = True,
                   eps: float = 1e-6) -> torch.Tensor:
    """A_i = r_i - mean_group(r), divided by (std_group(r) + eps) when `scale`;
    `group_rows` [N, n] holds each row's group's rewards.

    std is the sample std (n - 1), as in GRPO's reference code. A group whose
    rewards are all equal gets A = 0 for every member.
    """
    g = group_rows.float()
    centered = rewards.float() - g.mean(dim=1)
    if scale:
        centered = centered / (g.std(dim=1) + eps)
    # an all-equal group is 0 / 0: exactly 0 whatever eps is, also where the mean of equal
    # rewards rounds (0.3 x 8 / 8 is not 0.3 in floating point)
    return torch.where(g.amax(dim=1) > g.amin(dim=1), centered, torch.zeros_like(centered))


def group_advantages(rewards: torch.Tensor, n: int, scale: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """row_advantages for whole groups: `rewards` [G * n], a group's rows contiguous."""
    return row_advantages(rewards, rewards.view(-1, n).repeat_interleave(n, dim=0), scale, eps)


def row_reweighted_advantages(rewards: torch.Tensor, group_rows: torch.Tensor) -> torch.Tensor:
    """GRPO_RW's advantages: (r_i - p) / (p (1 - p)) per group, p the group's
    accuracy (rewards read as correct when > 0.5); 0 for an all-equal group.

    For binary rewards GRPO's (r_i - p) / sqrt(p (1 - p)) weighs each question
    by omega(p) = sqrt(p (1 - p)) relative to this (DisCO, Proposition 1):
    dividing once more by that weight removes the difficulty bias. A correct
    response gets +1/p, a wrong one -1/(1 - p)."""
    correct = (rewards > 0.5).float()
    p = (group_rows > 0.5).float().mean(dim=1)
    var = p * (1 - p)
    return torch.where(var > 0, (correct - p) / var.clamp(min=1e-12), torch.zeros_like(correct))


def reweighted_advantages(rewards: torch.Tensor, n: int) -> torch.Tensor:
    """row_reweighted_advantages for whole groups (a group's rows contiguous)."""
    return row_reweighted_advantages(rewards, rewards.view(-1, n).repeat_interleave(n, dim=0))


# name -> (batch, eps) -> [N] advantages
ADVANTAGES: dict[str, Callable[[PolicyBatch, float], torch.Tensor]] = {
    # GRPO: the group's mean subtracted, divided by its std
    "grpo": lambda b, eps: row_advantages(b.rewards, b.group_rows(), True, eps),
    # Dr. GRPO: the group's mean subtracted, no std division (SIREN and its baselines too)
    "dr_grpo": lambda b, eps: row_advantages(b.rewards, b.group_rows(), False, eps),
    # GRPO_RW: DisCO's reweighting, no question weight (the difficulty-bias ablation)
    "grpo_rw": lambda b, eps: row_reweighted_advantages(b.rewards, b.group_rows()),
}


def advantages(batch: PolicyBatch, estimator: str = "grpo", eps: float = 1e-6) -> torch.Tensor:
    """The batch's per-row advantages by the named estimator."""
    return ADVANTAGES[estimator](batch, eps)
