"""Clip-Cov (Cui et al. 2025), one of SIREN's entropy baselines (see entropy_reg.py)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import torch

from rlvr.objectives.advantages import advantages
from rlvr.objectives.base import LossOutput, Needs, PolicyBatch, token_covariance, token_share
from rlvr.objectives.policy_term import DrGRPOTermParams, aggregate, clipped_policy_loss
from rlvr.objectives.registry import register
from rlvr.schema import ANY, FRACTION, Range


def batch_seed(batch: PolicyBatch) -> int:
    """A seed that is a function of the batch alone (old log-probs, mask, rewards),
    so a random choice made from it is reproducible and the objective stays pure."""
    h = hashlib.blake2b(digest_size=8)
    for t in (batch.old_logp, batch.mask, batch.rewards):
        h.update(t.detach().float().contiguous().cpu().numpy().tobytes())
    return int.from_bytes(h.digest(), "little") & ((1 << 63) - 1)


@dataclass
class ClipCovParams(DrGRPOTermParams):
    cov_clip_ratio: float = 2e-4  # share of real tokens detached (at least 1), drawn from the band
    cov_clip_bounds_low: float = 1.0  # the band: cov > low (strict)
    cov_clip_bounds_high: float = 5.0  # the band: cov < high (strict)
    ranges: ClassVar[dict[str, Range]] = {**DrGRPOTermParams.ranges, "cov_clip_ratio": FRACTION,
                                          "cov_clip_bounds_low": ANY, "cov_clip_bounds_high": ANY}

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        if self.cov_clip_bounds_low >= self.cov_clip_bounds_high:
            problems.append(f"'{where}': the band cov_clip_bounds_low < cov < cov_clip_bounds_high is empty, got "
                            f"{self.cov_clip_bounds_low} and {self.cov_clip_bounds_high}")

    def needs(self) -> Needs:
        return Needs(per_call=True)  # the covariance's means and the token budget are per loss call


@register("clip_cov", ClipCovParams, examples=({},))
def clip_cov(batch: PolicyBatch, hp: ClipCovParams, generator: torch.Generator | None = None) -> LossOutput:
    """Clip-Cov (Cui et al.; core_algos.compute_policy_loss_clip_cov).

    1. Per-token PPO loss l_it = max(-rho A, -clip(rho, 1-clip_low, 1+clip_high) A)
       (no dual clip: the official Clip-Cov loss has none).
    2. cov_it = token_covariance(A, log p) (means over the batch's real tokens).
    3. Candidates: real tokens NOT already clipped by the PPO clip (-clip(rho) A >
       -rho A) with cov_clip_bounds_low < cov_it < cov_clip_bounds_high (strict).
    4. Budget k = max(int(cov_clip_ratio * #real tokens), 1); choose min(k, #candidates)
       candidates uniformly at random without replacement.
    5. Selected tokens are detached: their loss is multiplied by 0 (no value, no
       gradient), but they stay in the denominator N * max_response_len.

    Randomness: the official code draws `torch.randperm(len(candidates))` from the
    global, unseeded torch RNG. Here the permutation comes from `generator` or, when
    none is given, from a CPU generator seeded with batch_seed(batch), so the same
    batch always selects the same tokens. No draw is made when every candidate fits.
    Official values: ratio 2e-4, band (1, 5), PPO clip 0.2 (SIREN); Cui et al.'s own
    Clip-Cov scripts use clip_ratio_low/high = 1 instead.
    """
    adv = advantages(batch, hp.advantage, hp.adv_eps)
    per_token, clipped = clipped_policy_loss(batch.logp, batch.old_logp, adv, hp.clip_low, hp.clip_high,
                                             ratio=hp.ratio, mask=batch.mask)
    real = batch.mask > 0
    cov = token_covariance(adv, batch.logp, batch.mask)
    band = real & ~clipped & (cov > hp.cov_clip_bounds_low) & (cov < hp.cov_clip_bounds_high)
    budget = max(int(hp.cov_clip_ratio * int(real.sum())), 1)
    cand = band.nonzero()
    if len(cand) > budget:
        if generator is None:
            generator = torch.Generator().manual_seed(batch_seed(batch))
        perm = torch.randperm(len(cand), generator=generator)[:budget]
        cand = cand[perm.to(cand.device)]
    selected = torch.zeros_like(real)
    selected[cand[:, 0], cand[:, 1]] = True
    loss = aggregate(per_token * (~selected).to(per_token.dtype), batch.mask, hp.aggregation, batch)
    return LossOutput(loss, {
        "clip_frac": token_share(clipped, batch.mask), "cov_clip_frac": token_share(selected, batch.mask),
        "cov_candidates": band.sum().float(),
    })
