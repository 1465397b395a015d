"""SIREN: Selective Entropy Regularization (arXiv 2509.25133).

A Dr. GRPO-style policy loss (aggregated seq-mean-token-sum-norm, as the
official loss_agg_mode) plus entropy_coef * (agg(H, M) - H_anchor)^2,
where H is the entropy of the top-p nucleus (where to explore in the
vocabulary), M keeps each response's peak-entropy tokens (where in the
sequence), and H_anchor is the initial policy's value (how much).

The official ablations (experiment_type abla_*, dp_actor.py lines 502-546 in
Linn3a/siren) are settings, each removing one part as its name says:
abla_wo_anchor `anchored: false` (a linear bonus -agg(H, M)), abla_wo_topp
`entropy_measure: full`, abla_wo_token `token_mask: all`, abla_token_first
`token_mask: peak_of_full` (tokens chosen by the full-vocabulary entropy,
their top-p entropy regularized), abla_only_anchor `entropy_measure: full`
with `token_mask: all`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import torch

from rlvr.objectives.base import LossOutput, Needs, PolicyBatch, check_choice
from rlvr.objectives.policy_term import DrGRPOTermParams, policy_term
from rlvr.objectives.registry import register
from rlvr.schema import AT_LEAST_0, AT_LEAST_1, FRACTION, Range


@dataclass
class SirenParams(DrGRPOTermParams):
    entropy_coef: float = 0.0  # weight of the regularizer (agg(H, M) - H_anchor)^2
    entropy_top_p: float = 0.8  # the nucleus H is measured over
    entropy_top_k: int = 10000  # at most this many tokens in it
    peak_quantile: float = 0.8  # M keeps each response's tokens above this quantile of H
    ranges: ClassVar[dict[str, Range]] = {**DrGRPOTermParams.ranges, "entropy_coef": AT_LEAST_0,
                                          "entropy_top_p": FRACTION, "entropy_top_k": AT_LEAST_1,
                                          "peak_quantile": Range(0, 1, high_open=True)}
    anchored: bool = True  # false: the regularizer is the bonus -agg(H, M) (abla_wo_anchor)
    entropy_measure: str = "topp"  # topp: H over the nucleus | full: the full-vocabulary entropy (abla_wo_topp)
    token_mask: str = "peak"  # peak: M from H | all: every token (abla_wo_token) | peak_of_full: M from the
                              # full-vocabulary entropy (abla_token_first)

    def needs(self) -> Needs:
        regularized = frozenset({measured(self)})
        selects = frozenset({"entropy"}) if self.token_mask == "peak_of_full" else frozenset()
        anchor = partial(anchor_value, hp=self) if self.anchored else None
        return Needs(entropies=regularized | selects, grad_entropies=regularized,
                     topp=(self.entropy_top_p, self.entropy_top_k), anchor=anchor,
                     per_call=self.entropy_coef > 0)  # the regularizer is the loss call's

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        check_choice(where, "entropy_measure", self.entropy_measure, ("topp", "full"), problems)
        check_choice(where, "token_mask", self.token_mask, ("peak", "all", "peak_of_full"), problems)


def measured(hp: SirenParams) -> str:
    """The batch's name of the regularized entropy."""
    return {"topp": "topp_entropy", "full": "entropy"}[hp.entropy_measure]


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


def token_mask(entropies: dict[str, torch.Tensor | None], mask: torch.Tensor, hp: SirenParams) -> torch.Tensor:
    """M: the tokens whose entropy is regularized."""
    if hp.token_mask == "all":
        return mask
    chooser = entropies["entropy" if hp.token_mask == "peak_of_full" else measured(hp)]
    return peak_entropy_mask(chooser, mask, hp.peak_quantile)


def regularized_entropy(entropies: dict[str, torch.Tensor | None], mask: torch.Tensor,
                        hp: SirenParams) -> torch.Tensor:
    """agg(H, M) with H and M as the settings choose (the paper's: top-p H, peak M)."""
    h = entropies[measured(hp)]
    if h is None or (hp.token_mask == "peak_of_full" and entropies.get("entropy") is None):
        raise ValueError(f"siren with entropy_measure {hp.entropy_measure!r} and token_mask {hp.token_mask!r} "
                         f"needs the batch's {measured(hp)} (and entropy for peak_of_full)")
    return aggregate(h, token_mask(entropies, mask, hp))


def anchor_value(entropies: dict[str, torch.Tensor], mask: torch.Tensor, hp: SirenParams) -> float:
    """H_anchor from the initial policy's rollouts (a constant, no gradient)."""
    with torch.no_grad():
        return regularized_entropy(entropies, mask, hp).item()


OFFICIAL = {"entropy_coef": 0.005, "dual_clip": 3.0}  # siren.sh


@register("siren", SirenParams, examples=(OFFICIAL, {**OFFICIAL, "anchored": False},
                                          {**OFFICIAL, "entropy_measure": "full"}, {**OFFICIAL, "token_mask": "all"},
                                          {**OFFICIAL, "token_mask": "peak_of_full"}))
def siren(batch: PolicyBatch, hp: SirenParams) -> LossOutput:
    """Loss = P + entropy_coef * (agg(H, M) - H_anchor)^2.

    P, the policy term, is the official loss_agg_mode seq-mean-token-sum-norm:
    sum over real tokens of the (dual-)clipped PPO loss with Dr. GRPO advantages,
    divided by (number of responses * max_response_len) — not a token mean
    (dp_actor.py compute_policy_loss + core_algos.py agg_loss in Linn3a/siren).
    The regularizer is taken per loss call, the official grain (a dynamic-batch
    bin of at most 4,096 tokens), and weighted by the call's share of the
    mini-batch's responses, as verl weighs a bin's loss. Without the anchor
    (`anchored: false`) it is -agg(H, M).
    """
    if hp.anchored and batch.entropy_anchor is None:
        raise ValueError("siren needs the anchor (entropy_anchor)")
    if batch.max_response_len <= 0:
        raise ValueError("siren needs max_response_len > 0 (seq-mean-token-sum-norm)")
    policy, metrics = policy_term(batch, hp)
    agg = regularized_entropy({"entropy": batch.entropy, "topp_entropy": batch.topp_entropy}, batch.mask, hp)
    reg = (agg - batch.entropy_anchor) ** 2 if hp.anchored else -agg
    return LossOutput(policy + hp.entropy_coef * batch.share * reg,
                      {**metrics, "siren_entropy": agg.detach(), "siren_reg": reg.detach()})
