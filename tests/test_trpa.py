"""TRPA's loss against hand-computed values (rlvr.objectives.trpa)."""

import math

import pytest
import torch

from rlvr.objectives.base import MiniBatchTotals, PolicyBatch
from rlvr.objectives.registry import settings
from rlvr.objectives.trpa import log_ratio_scores, trpa


def batch(rewards, old_shift=0.0, totals=None) -> PolicyBatch:
    """Two questions, n=3; scores (reference log-probs 0, second row's second token padding):
    s = [-2, -1, -4, -1, -2, -3]."""
    logp = torch.tensor([[-1.0, -3.0], [-1.0, 9.0], [-5.0, -3.0],
                         [-1.0, -1.0], [-2.0, -2.0], [-3.0, -3.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1], [1, 0], [1, 1], [1, 1], [1, 1], [1, 1]])
    return PolicyBatch(logp=logp, old_logp=logp.detach() + old_shift, mask=mask, rewards=torch.tensor(rewards),
                       group_size=3, ref_logp=torch.zeros(6, 2), totals=totals)


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))  # -log sigmoid(-x)


def test_scores_are_mean_log_ratios_to_the_reference():
    b = batch([1.0, 0, 0, 1, 1, 1])
    b.ref_logp = torch.full((6, 2), -0.5)
    assert log_ratio_scores(b.logp, b.ref_logp, b.mask).tolist() == [-1.5, -0.5, -3.5, -0.5, -1.5, -2.5]


def test_pairs_within_groups_weighted_by_anisotropy_times_beta():
    # group 1: correct s=-2 against wrong -1 and -4 -> margins 0.25 * (-1, 2); group 2 all correct: no pair
    out = trpa(batch([1.0, 0, 0, 1, 1, 1]), settings("trpa", beta=0.1, anisotropy=2.5))
    assert out.loss.item() == pytest.approx((softplus(0.25) + softplus(-0.5)) / 2, rel=1e-6)
    assert out.metrics["trpa_pairs"].item() == 2


def test_pairs_of_every_group_are_averaged_together():
    # group 2 now [1, 0, 0]: correct s=-1 against -2 and -3 -> margins 0.1 * (1, 2)
    out = trpa(batch([1.0, 0, 0, 1, 0, 0]), settings("trpa", beta=0.1, anisotropy=1.0))
    expected = (softplus(-0.1 * -1) + softplus(-0.1 * 2) + softplus(-0.1 * 1) + softplus(-0.1 * 2)) / 4
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)


def test_a_call_without_pairs_falls_back_to_signed_scores_without_beta():
    # every group all correct or all wrong: -mean log sigmoid(+s correct, -s wrong)
    out = trpa(batch([1.0, 1, 1, 0, 0, 0]), settings("trpa"))
    s = [-2, -1, -4, -1, -2, -3]
    expected = (sum(softplus(-x) for x in s[:3]) + sum(softplus(x) for x in s[3:])) / 6
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)
    assert out.metrics["trpa_pairs"].item() == 0


def test_trust_region_is_verls_low_var_kl_to_pi_old():
    d = 0.3  # old = logp + d on every token: k3 = exp(d) - d - 1
    p = settings("trpa", trust_region_coef=1.0)
    near = trpa(batch([1.0, 0, 0, 1, 1, 1]), p)
    far = trpa(batch([1.0, 0, 0, 1, 1, 1], old_shift=d), p)
    assert (far.loss - near.loss).item() == pytest.approx(math.exp(d) - d - 1, rel=1e-5)
    assert far.metrics["trust_region_kl"].item() == pytest.approx(math.exp(d) - d - 1, rel=1e-5)
    # on-policy (pi == pi_old) the term has no gradient: only the preference moves the policy
    b = batch([1.0, 0, 0, 1, 1, 1])
    (g,) = torch.autograd.grad(trpa(b, p).loss, b.logp)
    b2 = batch([1.0, 0, 0, 1, 1, 1])
    (g0,) = torch.autograd.grad(trpa(b2, settings("trpa", trust_region_coef=0.0)).loss, b2.logp)
    assert torch.allclose(g, g0, atol=1e-7)


def test_preference_gradient_raises_the_winner_and_lowers_the_losers():
    b = batch([1.0, 0, 0, 1, 1, 1])
    (g,) = torch.autograd.grad(trpa(b, settings("trpa")).loss, b.logp)
    assert (g[0] < 0).all() and (g[1, 0] > 0) and (g[2] > 0).all()  # descent raises row 0's log-probs
    assert g[1, 1] == 0 and (g[3:] == 0).all()  # padding and the pair-less group get nothing


def test_the_calls_share_weights_the_loss():
    whole = trpa(batch([1.0, 0, 0, 1, 1, 1]), settings("trpa")).loss.item()
    half = trpa(batch([1.0, 0, 0, 1, 1, 1], totals=MiniBatchTotals(responses=12, tokens=20, groups=4)),
                settings("trpa")).loss.item()
    assert half == pytest.approx(whole / 2)


def test_needs_whole_groups_and_the_reference_and_checks_its_settings():
    needs = settings("trpa").needs()
    assert needs.whole_groups and needs.reference_model
    problems = []
    settings("trpa", beta=0.0, trust_region_coef=-1.0).check("methods.trpa", problems)
    assert len(problems) == 1 and "beta" in problems[0]
    with pytest.raises(ValueError, match="ref_logp"):
        b = batch([1.0, 0, 0, 1, 1, 1])
        b.ref_logp = None
        trpa(b, settings("trpa"))
