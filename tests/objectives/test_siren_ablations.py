"""SIREN's official ablations as settings (rlvr.objectives.siren), on hand values.

Batch: two responses, the second with one real token (its padded entropies
must not count). Top-p entropies H = [[1, 3], [2, <9>]], full-vocabulary
entropies F = [[4, 2], [5, <7>]]. A one-token response keeps no peak token
(its quantile is its value; the mask is strict)."""

import math

import pytest
import torch

from rlvr.objectives.base import PolicyBatch
from rlvr.objectives.registry import settings
from rlvr.objectives.siren import regularized_entropy, siren

TOPP = torch.tensor([[1.0, 3.0], [2.0, 9.0]])
FULL = torch.tensor([[4.0, 2.0], [5.0, 7.0]])
MASK = torch.tensor([[1.0, 1.0], [1.0, 0.0]])


def batch(anchor=1.0) -> PolicyBatch:
    logp = torch.tensor([[math.log(1.5), math.log(0.9)], [math.log(0.5), 7.0]], requires_grad=True)
    return PolicyBatch(logp=logp, old_logp=torch.zeros(2, 2), mask=MASK, rewards=torch.tensor([1.0, 0.0]),
                       group_size=2, max_response_len=4, entropy=FULL.clone().requires_grad_(),
                       topp_entropy=TOPP.clone().requires_grad_(), entropy_anchor=anchor)


@pytest.mark.parametrize("measure, mask, expected", [
    ("topp", "peak", (3 + 0) / 2),   # the paper's: r0's 0.8 quantile of [1, 3] is 2.6 -> keeps 3
    ("topp", "all", (2 + 2) / 2),    # abla_wo_token: every real token, mean per response
    ("full", "peak", (4 + 0) / 2),   # abla_wo_topp: r0's quantile of [4, 2] is 3.6 -> keeps 4
    ("topp", "peak_of_full", (1 + 0) / 2),  # abla_token_first: F picks r0's first token, its H is 1
    ("full", "all", (3 + 5) / 2),    # abla_only_anchor: full entropy, every token
])
def test_each_ablation_regularizes_the_entropy_its_name_says(measure, mask, expected):
    hp = settings("siren", entropy_measure=measure, token_mask=mask)
    agg = regularized_entropy({"entropy": FULL, "topp_entropy": TOPP}, MASK, hp)
    assert agg.item() == pytest.approx(expected)


def test_without_the_anchor_the_regularizer_is_a_bonus():
    coef = 0.005
    anchored = siren(batch(anchor=1.0), settings("siren", entropy_coef=coef, dual_clip=3.0))
    bonus = siren(batch(anchor=None), settings("siren", entropy_coef=coef, dual_clip=3.0, anchored=False))
    policy = anchored.loss.item() - coef * (1.5 - 1.0) ** 2
    assert bonus.loss.item() == pytest.approx(policy - coef * 1.5, rel=1e-6)
    b = batch(anchor=None)
    out = siren(b, settings("siren", entropy_coef=coef, anchored=False))
    (g,) = torch.autograd.grad(out.loss, b.topp_entropy)
    # descent raises the kept token's entropy: -coef * (1 / kept tokens) / responses
    assert torch.allclose(g, torch.tensor([[0.0, -coef / 2], [0.0, 0.0]]))


def test_the_regularized_entropy_carries_the_gradient():
    b = batch()
    out = siren(b, settings("siren", entropy_coef=1.0, entropy_measure="full", token_mask="all"))
    g_full, g_topp = torch.autograd.grad(out.loss, [b.entropy, b.topp_entropy], allow_unused=True)
    # (agg - 1)^2 with agg = (3 + 5) / 2 = 4: d/dF = 2 * 3 * (1/2 per token of r0 | 1 for r1's) / 2 responses
    assert torch.allclose(g_full, torch.tensor([[1.5, 1.5], [3.0, 0.0]]))
    assert g_topp is None


def test_needs_follow_the_settings():
    paper = settings("siren").needs()
    assert paper.entropies == paper.grad_entropies == {"topp_entropy"} and paper.anchor is not None
    full = settings("siren", entropy_measure="full").needs()
    assert full.entropies == full.grad_entropies == {"entropy"}
    first = settings("siren", token_mask="peak_of_full").needs()
    assert first.entropies == {"entropy", "topp_entropy"} and first.grad_entropies == {"topp_entropy"}
    assert settings("siren", anchored=False).needs().anchor is None
    anchor = settings("siren", entropy_measure="full", token_mask="all").needs().anchor
    assert anchor({"entropy": FULL, "topp_entropy": TOPP}, MASK) == pytest.approx(4.0)


def test_unknown_ablation_values_are_config_errors():
    problems = []
    settings("siren", entropy_measure="nucleus", token_mask="first").check("methods.x", problems)
    assert len(problems) == 2 and "topp" in problems[0] and "peak_of_full" in problems[1]
