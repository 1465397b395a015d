"""SIREN: Selective Entropy Regularization (arXiv 2509.25133).

A Dr. GRPO-style policy loss (aggregated seq-mean-token-sum-norm, as the
official loss_agg_mode) plus entropy_coef * (agg(H, M) - H_anchor)^2,
where H is the entropy of the top-p nucleus (where to explore in the
vocabulary), M keeps each response's peak-entropy tokens (where in the
sequence), and H_anchor is the initial policy's value (how much).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from rlvr.objectives.base import LossOutput, Needs, PolicyBatch, PolicyTermParams, advantages, policy_term
from rlvr.objectives.registry import register


@dataclass
class SirenParams(PolicyTermParams):
    entropy_coef: float = 0.0  # weight of the regularizer (agg(H, M) - H_anchor)^2
    entropy_top_p: float = 0.8  # the nucleus H is measured over
    entropy_top_k: int = 10000  # at most this many tokens in it
    peak_quantile: float = 0.8  # M keeps each response's tokens above this quantile of H

    def needs(self) -> Needs:
        top_p = frozenset({"topp_entropy"})
        return Needs(entropies=top_p, grad_entropies=top_p, topp=(self.entropy_top_p, self.entropy_top_k),
                     anchor=partial(anchor_value, quantile=self.peak_quantile))

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        if not (0 < self.entropy_top_p <= 1 and self.entropy_top_k >= 1 and 0 <= self.peak_quantile < 1):
            problems.append(f"'{where}': entropy_top_p in (0, 1], entropy_top_k >= 1 and peak_quantile in [0, 1), "
                            f"got {self.entropy_top_p}, {self.entropy_top_k}, {self.peak_quantile}")


def peak_entropy_mask(h: torch.Tensor, mask: torch.Tensor, quantile: float = 0.8) -> torch.Tensor:
    """M_it = H_it > tau_i, tau_i the `quantile` of H over response i's real
    tokens, interpolated linearly as torch.quantile does; all rows at once, so
    a GPU never waits on the host (a response without real tokens keeps none)."""
    hd = h.detach().float()
    real = mask > 0
    n = real.sum(-1)
    ordered = torch.where(real, hd, torch.full_like(hd, float("inf"))).sort(dim=-1).values  # real values first
    rank = torch.tensor(quantile, dtype=hd.dtype, device=hd.device) * (n - 1).clamp(min=0).to(hd.dtype)
    below, above = rank.floor().long(), rank.ceil().long()
    tau = ordered.gather(-1, below[:, None]).lerp(ordered.gather(-1, above[:, None]), (rank - below)[:, None])
    return ((hd > tau) & real).to(mask.dtype)


def aggregate(h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Mean over responses of the masked-mean entropy; a response with no kept token counts 0."""
    per_seq = (h * m).sum(-1) / m.sum(-1).clamp(min=1)
    return per_seq.mean()


def anchor_value(h: torch.Tensor, mask: torch.Tensor, quantile: float = 0.8) -> float:
    """H_anchor from the initial policy's rollouts (a constant, no gradient)."""
    with torch.no_grad():
        return aggregate(h, peak_entropy_mask(h, mask, quantile)).item()


@register("siren", SirenParams)
def siren(batch: PolicyBatch, hp: SirenParams) -> LossOutput:
    """Loss = P + entropy_coef * (agg(H, M) - H_anchor)^2.

    P, the policy term, is the official loss_agg_mode seq-mean-token-sum-norm:
    sum over real tokens of the (dual-)clipped PPO loss with Dr. GRPO advantages,
    divided by (number of responses * max_response_len) — not a token mean
    (dp_actor.py compute_policy_loss + core_algos.py agg_loss in Linn3a/siren).
    The regularizer is taken per loss call, the official grain (a dynamic-batch
    bin of at most 4,096 tokens), and weighted by the call's share of the
    mini-batch's responses, as verl weighs a bin's loss.
    """
    if batch.topp_entropy is None or batch.entropy_anchor is None:
        raise ValueError("siren needs the top-p entropy (topp_entropy) and the anchor (entropy_anchor)")
    if batch.max_response_len <= 0:
        raise ValueError("siren needs max_response_len > 0 (seq-mean-token-sum-norm)")
    policy, metrics = policy_term(batch, advantages(batch, scale=False), hp, "seq-mean-token-sum-norm")
    m = peak_entropy_mask(batch.topp_entropy, batch.mask, hp.peak_quantile)
    agg = aggregate(batch.topp_entropy, m)
    reg = (agg - batch.entropy_anchor) ** 2
    return LossOutput(policy + hp.entropy_coef * batch.share * reg,
                      {**metrics, "siren_entropy": agg.detach(), "siren_reg": reg.detach()})
