"""SIREN: Selective Entropy Regularization (arXiv 2509.25133).

A Dr. GRPO-style policy loss (aggregated seq-mean-token-sum-norm, as the
official loss_agg_mode) plus entropy_coef * (agg(H, M) - H_anchor)^2,
where H is the entropy of the top-p nucleus (where to explore in the
vocabulary), M keeps each response's peak-entropy tokens (where in the
sequence), and H_anchor is the initial policy's value (how much).
"""

from __future__ import annotations

import torch

from rlvr.objectives.base import (
    LossOutput,
    PolicyBatch,
    clipped_policy_loss,
    group_advantages,
    seq_sum_norm,
    token_mean,
)


NUCLEUS_PROBE = 256


def topp_entropy(logits: torch.Tensor, temperature: float = 1.0, top_p: float = 0.8, top_k: int = 10000
                 ) -> torch.Tensor:
    """Entropy of the renormalized nucleus, per position ([..., V] -> [...]).

    The nucleus S holds the tokens whose inclusive cumulative mass (sorted,
    top_k at most) is strictly below top_p: the token that crosses top_p is
    not in S. |S| <= 1 gives 0. S is chosen without gradient; the gradient
    flows through the renormalized probabilities q.
    """
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    k = min(top_k, probs.shape[-1])
    # A nucleus is usually small: look at the top 256 first. Where they already
    # hold top_p of the mass, no later token can be in S, so the result is exact.
    top, _ = torch.topk(probs, min(k, NUCLEUS_PROBE), dim=-1)  # sorted, descending
    if top.shape[-1] < k and bool((top.sum(-1) < top_p).any()):
        top, _ = torch.topk(probs, k, dim=-1)
    with torch.no_grad():
        keep = (torch.cumsum(top, dim=-1) < top_p).float()
    kept = top * keep
    q = kept / kept.sum(-1, keepdim=True).clamp(min=1e-12)
    h = -(q * torch.log(q.clamp(min=1e-12))).sum(-1)
    return torch.where(keep.sum(-1) > 1, h, torch.zeros_like(h))


def peak_entropy_mask(h: torch.Tensor, mask: torch.Tensor, quantile: float = 0.8) -> torch.Tensor:
    """M_it = H_it > tau_i, tau_i the `quantile` (linear) of H over response i's real tokens."""
    out = torch.zeros_like(mask)
    hd = h.detach()
    for i in range(h.shape[0]):
        real = mask[i] > 0
        if real.any():
            tau = torch.quantile(hd[i][real].float(), quantile)
            out[i] = ((hd[i] > tau) & real).float()
    return out


def aggregate(h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Mean over responses of the masked-mean entropy; a response with no kept token counts 0."""
    per_seq = (h * m).sum(-1) / m.sum(-1).clamp(min=1)
    return per_seq.mean()


def anchor_value(h: torch.Tensor, mask: torch.Tensor, quantile: float = 0.8) -> float:
    """H_anchor from the initial policy's rollouts (a constant, no gradient)."""
    with torch.no_grad():
        return aggregate(h, peak_entropy_mask(h, mask, quantile)).item()


def siren(batch: PolicyBatch, hp) -> LossOutput:
    """Loss = P + entropy_coef * (agg(H, M) - H_anchor)^2.

    P, the policy term, is the official loss_agg_mode seq-mean-token-sum-norm:
    sum over real tokens of the (dual-)clipped PPO loss with Dr. GRPO advantages,
    divided by (number of responses * max_response_len) — not a token mean
    (dp_actor.py compute_policy_loss + core_algos.py agg_loss in Linn3a/siren).
    """
    if batch.topp_entropy is None or batch.entropy_anchor is None:
        raise ValueError("siren needs the top-p entropy (topp_entropy) and the anchor (entropy_anchor)")
    if batch.max_response_len <= 0:
        raise ValueError("siren needs max_response_len > 0 (seq-mean-token-sum-norm)")
    adv = group_advantages(batch.rewards, batch.group_size, scale=False)
    per_token, clipped = clipped_policy_loss(batch.logp, batch.old_logp, adv, hp.clip_low, hp.clip_high,
                                             dual_clip=hp.dual_clip)
    policy = seq_sum_norm(per_token, batch.mask, batch.max_response_len)
    m = peak_entropy_mask(batch.topp_entropy, batch.mask, hp.peak_quantile)
    agg = aggregate(batch.topp_entropy, m)
    reg = (agg - batch.entropy_anchor) ** 2
    return LossOutput(policy + hp.entropy_coef * reg, {
        "clip_frac": token_mean(clipped.float(), batch.mask).item(),
        "siren_entropy": agg.item(), "siren_reg": reg.item(),
    })
