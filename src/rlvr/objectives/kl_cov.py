"""KL-Cov (Cui et al. 2025), one of SIREN's entropy baselines (see entropy_reg.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from rlvr.objectives.advantages import advantages
from rlvr.objectives.base import (
    LossOutput,
    Needs,
    ObjectiveParams,
    PolicyBatch,
    seq_sum_norm,
    token_covariance,
    token_mean,
    token_share,
)
from rlvr.objectives.registry import register
from rlvr.schema import AT_LEAST_0, FRACTION, Range


@dataclass
class KLCovParams(ObjectiveParams):
    kl_cov_ratio: float = 2e-4  # share of real tokens (top covariance, at least 1) given the KL term
    kl_cov_coef: float = 1.0  # weight of |log p - log p_old| on the selected tokens
    ranges: ClassVar[dict[str, Range]] = {"kl_cov_ratio": FRACTION, "kl_cov_coef": AT_LEAST_0}

    def needs(self) -> Needs:
        return Needs(per_call=True)  # the covariance's means and the token budget are per loss call


@register("kl_cov", KLCovParams, examples=({},))
def kl_cov(batch: PolicyBatch, hp: KLCovParams) -> LossOutput:
    """KL-Cov (Cui et al.; core_algos.compute_policy_loss_kl_cov).

        l_it = -rho_it A_i + kl_cov_coef * |log p_it - log p_old_it| * S_it

    with NO PPO clipping (clip_low/high and dual_clip are unused, as in the official
    loss). S selects the k = max(1, int(kl_cov_ratio * #real tokens)) real tokens
    with the largest cov_it = token_covariance(A, log p) (ties: torch.topk's order);
    no real token -> nothing selected. Selection is without gradient; the gradient
    flows through rho and through |log ratio| on S. Aggregation seq-mean-token-sum-norm.
    Official values in SIREN: ratio 2e-4 (a fraction; Cui et al.'s 7B scripts use
    k_percent 0.2 = 2e-3, the 32B ones 2e-4), coef 1.
    """
    adv = advantages(batch, "dr_grpo")
    log_ratio = batch.logp - batch.old_logp
    pg = -adv.unsqueeze(-1) * torch.exp(log_ratio)
    n_real = int((batch.mask > 0).sum())
    selected = torch.zeros_like(batch.mask, dtype=torch.bool)
    if n_real > 0:
        k = max(1, int(n_real * hp.kl_cov_ratio))
        cov = token_covariance(adv, batch.logp, batch.mask)
        top = torch.topk(cov.reshape(-1), k).indices
        selected.view(-1)[top] = True
    per_token = pg + hp.kl_cov_coef * log_ratio.abs() * selected.to(pg.dtype)
    loss = seq_sum_norm(per_token, batch.mask, batch.max_response_len, batch.total_responses)
    return LossOutput(loss, {
        "kl_cov_frac": token_share(selected, batch.mask),
        "abs_kl": token_mean(log_ratio.detach().abs(), batch.mask),
    })
