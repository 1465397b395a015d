"""Token entropies of the policy's distribution: the full one, and the nucleus
(top-p within top-k) one SIREN's official code measures, as values and as
differentiable terms; and the meter of a step's pi_old entropies."""

from __future__ import annotations

import torch

from rlvr import distributed
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


class EntropyMeter:
    """pi_old's entropies over a step's response tokens (device sums, read once
    per step), and on the first step of an objective with an anchor (SIREN)
    the top-p entropies it comes from."""

    def __init__(self, keep_for_anchor: bool = False):
        self.keep_for_anchor = keep_for_anchor
        self.sums: dict[str, torch.Tensor] = {}
        self.tokens = 0.0
        self.perplexity_sum: torch.Tensor | float = 0.0  # over responses: exp(-mean token log-prob)
        self.responses = 0.0
        self.kept: list[tuple[dict[str, torch.Tensor], torch.Tensor]] = []

    def add(self, out: dict[str, torch.Tensor], mask: torch.Tensor, tokens: int) -> None:
        for name in ENTROPIES:
            total = (out[name].detach() * mask).sum().double()
            self.sums[name] = self.sums[name] + total if name in self.sums else total
        self.tokens += tokens
        self.perplexity_sum = self.perplexity_sum + response_perplexity(out["logp"].detach(), mask).sum().double()
        self.responses += mask.shape[0]
        if self.keep_for_anchor:
            self.kept.append(({name: out[name].detach() for name in ENTROPIES}, mask))

    def anchor(self, value) -> float:
        """Over every rollout of the step on every rank: the response-weighted
        mean of `value(entropies, mask)` per pi_old pass."""
        weighted = sum(value(h, m) * m.shape[0] for h, m in self.kept)
        rows = sum(m.shape[0] for _, m in self.kept)
        weighted, rows = distributed.all_sum([weighted, float(rows)])
        return weighted / rows


def response_perplexity(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N] exp(-mean token log-prob) of each response under pi_old's sampling
    distribution (SIREN's perplexity analysis); an empty response gives 1."""
    return torch.exp(-(logp * mask).sum(-1) / mask.sum(-1).clamp(min=1))
