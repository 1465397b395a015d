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
    assert problems == ["'methods.trpa.beta' must be > 0, got 0.0",
                        "'methods.trpa.trust_region_coef' must be >= 0, got -1.0"]
    with pytest.raises(ValueError, match="ref_logp"):
        b = batch([1.0, 0, 0, 1, 1, 1])
        b.ref_logp = None
        trpa(b, settings("trpa"))


def test_four_levels_pair_every_two_levels_and_weigh_only_correct_winners():
    """Group 1 levels [1, 3, 4] with s = [-2, -1, -4]: pairs (1 > 3) and (1 > 4)
    at anisotropy x beta = 0.25, (3 > 4) at beta = 0.1. Group 2 levels
    [2, 2, 4] with s = [-1, -2, -3]: (2 > 4) twice at beta, the two level-2
    responses do not pair: the mean of the five losses."""
    b = batch([1.0, 0, 0, 0, 0, 0])
    b.levels = torch.tensor([1, 3, 4, 2, 2, 4])
    out = trpa(b, settings("trpa", beta=0.1, anisotropy=2.5))
    losses = [softplus(-0.25 * (-2 - -1)), softplus(-0.25 * (-2 - -4)), softplus(-0.1 * (-1 - -4)),
              softplus(-0.1 * (-1 - -3)), softplus(-0.1 * (-2 - -3))]
    assert out.metrics["trpa_pairs"].item() == 5
    assert out.loss.item() == pytest.approx(sum(losses) / 5, rel=1e-6)


def test_a_group_with_no_correct_answer_still_pairs_its_wrong_against_its_unanswered():
    """Both groups all wrong by reward: with two levels only, no pair (the
    fallback); with the official levels, a wrong answer (2) beats an empty
    one (3) and a missing one (4)."""
    b = batch([0.0, 0, 0, 0, 0, 0])
    assert trpa(b, settings("trpa")).metrics["trpa_pairs"].item() == 0
    b.levels = torch.tensor([2, 3, 4, 4, 4, 4])
    out = trpa(b, settings("trpa", beta=0.1))
    # group 1: s = [-2, -1, -4]: (2 > 3), (2 > 4), (3 > 4); group 2 all level 4: none
    expected = (softplus(-0.1 * (-2 - -1)) + softplus(-0.1 * (-2 - -4)) + softplus(-0.1 * (-1 - -4))) / 3
    assert out.metrics["trpa_pairs"].item() == 3
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)


def test_the_levels_come_from_the_grades_as_the_official_reward_sets_them():
    """deepscaler's grades: correct 1, wrong 2, an empty box 3, no box or no
    </think> 4 (math_reward_pl.py lines 36-86)."""
    from rlvr.grading.deepscaler import deepscaler_group
    from rlvr.grading.grades import preference_level

    responses = ["<think>x</think> \\boxed{4}", "<think>x</think> \\boxed{5}", "<think>x</think> \\boxed{}",
                 "<think>x</think> no box", "\\boxed{4} without the end of thinking"]
    grades = deepscaler_group(["4"], responses, 5, "</think>").items
    assert [preference_level(g) for g in grades] == [1, 2, 3, 4, 4]
