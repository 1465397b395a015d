"""The 80/20 forking tokens (Wang et al. 2025), one of SIREN's entropy
baselines (see entropy_reg.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from rlvr.objectives.base import ENTROPY, LossOutput, Needs, PolicyBatch, check_choice, need_entropy, token_share
from rlvr.objectives.policy_term import DrGRPOTermParams, policy_term
from rlvr.objectives.registry import register
from rlvr.objectives.siren import peak_entropy_mask
from rlvr.schema import OPEN_FRACTION, Range


def forking_mask(h: torch.Tensor, mask: torch.Tensor, top_ratio: float, scope: str = "response") -> torch.Tensor:
    """The 80/20 token selection (no gradient): M_it = H_it > tau (strict), tau the
    linear (1 - top_ratio) quantile of H over the real tokens of each response
    ('response', SIREN's mask_by_quantile) or of the whole batch ('batch', Wang et al.'s
    batch-level threshold). A response whose real tokens share one entropy, or has a
    single token, keeps nothing under 'response'."""
    if not 0 < top_ratio < 1:
        raise ValueError(f"forking_top_ratio must be in (0, 1), got {top_ratio}")
    q = 1.0 - top_ratio
    if scope == "response":
        return peak_entropy_mask(h, mask, q)
    if scope == "batch":  # the batch's real tokens as one row: no boolean indexing, so no host sync
        return peak_entropy_mask(h.reshape(1, -1), mask.reshape(1, -1), q).view_as(mask)
    raise ValueError(f"forking_scope must be 'response' or 'batch', got '{scope}'")


@dataclass
class ForkingParams(DrGRPOTermParams):
    forking_top_ratio: float = 0.2  # keep the tokens with H above the (1 - ratio) quantile
    ranges: ClassVar[dict[str, Range]] = {**DrGRPOTermParams.ranges, "forking_top_ratio": OPEN_FRACTION}
    forking_scope: str = "response"  # the quantile's tokens: 'response' (SIREN's code) | 'batch' (Wang et al.)

    def needs(self) -> Needs:
        # read only: it selects tokens; a batch-wide quantile is the loss call's
        return Needs(entropies=ENTROPY, per_call=self.forking_scope == "batch")

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        check_choice(where, "forking_scope", self.forking_scope, ("response", "batch"), problems)


@register("forking_80_20", ForkingParams, examples=({"dual_clip": 3.0}, {"forking_scope": "batch"}))
def forking_80_20(batch: PolicyBatch, hp: ForkingParams) -> LossOutput:
    """Policy gradient on the high-entropy "forking" tokens only (Wang et al.;
    experiment_type 'baseline_eighty_twenty').

        loss = sum_{i,t} m_it M_it l_it / (N * max_response_len)

    l_it is Dr. GRPO's clipped token loss (dual clip c = hp.dual_clip for A < 0) and
    M = forking_mask(H, m, forking_top_ratio, forking_scope): with the defaults, the
    tokens above each response's 0.8 entropy quantile (strict), as SIREN's code does
    it. H is the full-vocabulary entropy, used only to select tokens (no gradient);
    the gradient reaches log p only through selected tokens. Unselected tokens keep
    their place in the denominator (the official agg_loss divides by rows * width
    whatever the mask). Wang et al. pick the top 20% of the whole batch on top of
    DAPO: forking_scope 'batch' reproduces their selection only.
    """
    h = need_entropy(batch, "forking_80_20")
    m = forking_mask(h, batch.mask, hp.forking_top_ratio, hp.forking_scope)
    loss, metrics = policy_term(batch, hp, mask=batch.mask * m)
    return LossOutput(loss, {**metrics, "forking_frac": token_share(m, batch.mask)})
