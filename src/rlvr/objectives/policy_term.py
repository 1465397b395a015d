"""The clipped policy term, composed from named parts as verl composes
`adv_estimator` and `policy_loss.loss_mode`:

- `advantage`: the estimator (rlvr.objectives.advantages: grpo, dr_grpo, grpo_rw)
- `ratio`: token (PPO's per-token importance ratio) or sequence (GSPO's: the
  geometric mean of a response's token ratios, its gradient through each token)
- `aggregation`: how token losses become the loss (verl's agg_loss modes)
- the clip (`clip_low`, `clip_high`) and the dual clip for negative advantages

So GRPO, Dr. GRPO, DAPO's loss and a GSPO-style objective are one loss with
other settings (rlvr.objectives.grpo), and the objectives that add a term
(SIREN, the entropy baselines) call `policy_term` with their settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from rlvr.objectives.advantages import ADVANTAGES, advantages
from rlvr.objectives.base import (
    ObjectiveParams,
    PolicyBatch,
    check_choice,
    masked_sum,
    seq_mean,
    seq_mean_then_mean,
    seq_sum_norm,
    token_mean,
)
from rlvr.schema import AT_LEAST_0, Range

RATIOS = ("token", "sequence")
# verl's names for how token losses become the loss (core_algos.agg_loss)
AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
MAX_LOG_SEQUENCE_RATIO = 10.0  # verl's clamp of GSPO's log ratio, for numerical stability


@dataclass
class PolicyTermParams(ObjectiveParams):
    """The clipped policy term's settings (policy_term)."""

    advantage: str = "grpo"  # the estimator: grpo (group mean and std) | dr_grpo (group mean) | grpo_rw (DisCO's)
    adv_eps: float = 1e-6  # added to the group's std before dividing (grpo)
    ratio: str = "token"  # token: PPO's per-token ratio | sequence: GSPO's per-response ratio
    aggregation: str = "seq-mean-token-mean"  # token-mean (DAPO) | seq-mean-token-mean (GRPO) |
                                              # seq-mean-token-sum-norm (Dr. GRPO, SIREN)
    clip_low: float = 0.2  # the ratio is clipped to [1 - clip_low, 1 + clip_high]
    clip_high: float = 0.2  # DAPO's clip-higher: 0.28; GSPO: 3e-4 / 4e-4
    dual_clip: float | None = None  # cap for negative advantages: SIREN 3, DAPO (verl recipe) 10
    ranges: ClassVar[dict[str, Range]] = {"adv_eps": AT_LEAST_0, "clip_low": Range(0, 1, high_open=True),
                                          "clip_high": AT_LEAST_0, "dual_clip": Range(1, low_open=True)}

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        check_choice(where, "advantage", self.advantage, tuple(ADVANTAGES), problems)
        check_choice(where, "ratio", self.ratio, RATIOS, problems)
        check_choice(where, "aggregation", self.aggregation, AGGREGATIONS, problems)


def aggregate(x: torch.Tensor, mask: torch.Tensor, mode: str, batch: PolicyBatch) -> torch.Tensor:
    """Token values [N, T] to this call's share of the mini-batch's loss:
    'token-mean' divides the sum by the mini-batch's real tokens (DAPO),
    'seq-mean-token-mean' averages each response, then the responses (GRPO),
    'seq-mean-token-sum-norm' divides the sum by responses x max length (Dr. GRPO, SIREN)."""
    if mode == "token-mean":
        return masked_sum(x, mask) / batch.total_tokens
    if mode == "seq-mean-token-mean":
        return seq_mean_then_mean(x, mask, batch.total_responses)
    if mode == "seq-mean-token-sum-norm":
        return seq_sum_norm(x, mask, batch.max_response_len, batch.total_responses)
    raise ValueError(f"unknown aggregation '{mode}'; valid: {', '.join(AGGREGATIONS)}")


def policy_term(batch: PolicyBatch, p: PolicyTermParams, adv: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The clipped policy loss of `p`'s parts: advantages by `p.advantage` (or
    `adv`, [N] or per token [N, T], e.g. an entropy-shaped advantage), the
    ratio, clip and dual clip, aggregated by `p.aggregation` over `mask`
    (default: the real tokens). Returns the loss and its clip fraction (over
    the same tokens)."""
    mask = batch.mask if mask is None else mask
    adv = advantages(batch, p.advantage, p.adv_eps) if adv is None else adv
    per_token, clipped = clipped_policy_loss(batch.logp, batch.old_logp, adv, p.clip_low, p.clip_high,
                                             dual_clip=p.dual_clip, ratio=p.ratio, mask=batch.mask)
    return aggregate(per_token, mask, p.aggregation, batch), {"clip_frac": token_mean(clipped.float(), mask).detach()}


def log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, ratio: str = "token",
              mask: torch.Tensor | None = None) -> torch.Tensor:
    """[N, T] log importance ratios. token: log p - log p_old. sequence (GSPO,
    verl's compute_policy_loss_gspo): every token of a response carries the
    response's mean log ratio as its value, and its own log p's gradient
    (sg[log s_i] + log p_it - sg[log p_it]), clamped above at 10."""
    token = logp - old_logp
    if ratio == "token":
        return token
    if ratio == "sequence":
        if mask is None:
            raise ValueError("a sequence-level ratio needs the response mask")
        seq = seq_mean(token, mask).detach().unsqueeze(-1)
        return torch.clamp(logp - logp.detach() + seq, max=MAX_LOG_SEQUENCE_RATIO)
    raise ValueError(f"ratio must be one of {', '.join(RATIOS)}, got '{ratio}'")


def clipped_policy_loss(logp, old_logp, adv, clip_low: float, clip_high: float, dual_clip: float | None = None,
                        ratio: str = "token", mask: torch.Tensor | None = None):
    """Per-token PPO-clip loss -min(rho A, clip(rho, 1-cl, 1+ch) A) ([N, T]), and
    which tokens were clipped. With `dual_clip` c, a negative-advantage token's
    loss is capped at -c A (the dual-clip PPO bound). `adv` is per response ([N])
    or per token ([N, T], e.g. an entropy-shaped advantage); `ratio` as log_ratio."""
    rho = torch.exp(log_ratio(logp, old_logp, ratio, mask))
    a = adv if adv.dim() == logp.dim() else adv.unsqueeze(-1)
    unclipped = -rho * a
    clipped = -torch.clamp(rho, 1 - clip_low, 1 + clip_high) * a
    loss = torch.maximum(unclipped, clipped)
    was_clipped = clipped > unclipped
    if dual_clip is not None:
        cap = -dual_clip * a
        capped = (a < 0) & (loss > cap)
        loss = torch.where(a < 0, torch.minimum(loss, cap), loss)
        was_clipped = was_clipped | capped
    return loss, was_clipped


@dataclass
class DrGRPOTermParams(PolicyTermParams):
    """The policy term SIREN and its entropy baselines share (Linn3a/siren:
    norm_adv_by_std_in_grpo=False, loss_agg_mode seq-mean-token-sum-norm)."""

    advantage: str = "dr_grpo"
    aggregation: str = "seq-mean-token-sum-norm"
