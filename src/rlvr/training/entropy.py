"""Token entropies of the policy's distribution: the full one, and the nucleus
(top-p within top-k) one SIREN's official code measures, as values and as
differentiable terms."""

from __future__ import annotations

import torch

from rlvr.training.logit_blocks import LogitBlocks, compute_dtype


def full_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the whole next-token distribution ([..., V] -> [...]), differentiable."""
    logz = torch.logsumexp(logits, dim=-1, keepdim=True)
    p = torch.exp(logits - logz)
    return (logz.squeeze(-1) - (p * logits).sum(-1))


NUCLEUS_PROBE = 256


def topp_entropy(logits: torch.Tensor, temperature: float = 1.0, top_p: float = 0.8, top_k: int = 10000
                 ) -> torch.Tensor:
    """SIREN's top-p entropy: the entropy of the renormalized nucleus, per position
    ([..., V] -> [...]).

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


ENTROPIES = ("entropy", "topp_entropy")


def entropy_of(name: str, scaled_logits: torch.Tensor, topp: dict | None) -> torch.Tensor:
    if name == "entropy":
        return full_entropy(scaled_logits)
    return topp_entropy(scaled_logits, 1.0, topp["top_p"], topp["top_k"])


@torch.no_grad()
def measured_entropies(logits: torch.Tensor, temperature: float, names, topp: dict | None) -> dict:
    """Entropies without gradient (metrics, SIREN's anchor), one row block at a time."""
    out = {n: torch.empty(logits.shape[0], dtype=compute_dtype(logits), device=logits.device) for n in names}
    if not out:
        return out
    for s, z in LogitBlocks(logits, temperature):
        for n in names:
            out[n][s] = entropy_of(n, z, topp)
    return out
