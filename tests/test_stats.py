"""Intervals and verdicts against values computed by hand."""

import math

import numpy as np
import pytest

from rlvr import stats


def test_constant_values_have_a_zero_width_interval():
    assert stats.mean_ci([np.full(7, 0.25)]) == pytest.approx((0.25, 0.25, 0.25))


def test_mean_over_sets_is_unweighted_and_stratified():
    # set means 1.0 and 0.0 -> 0.5 whatever the sizes; each set is resampled within itself
    est, lo, hi = stats.mean_ci([np.ones(3), np.zeros(100)])
    assert est == 0.5 and lo == hi == 0.5


def test_paired_difference_of_a_run_with_itself_is_exactly_zero():
    a = np.random.default_rng(0).random(50)
    assert stats.paired_diff_ci([a], [a]) == (0.0, 0.0, 0.0)


def test_bootstrap_interval_of_a_mean_matches_the_normal_approximation():
    # 400 coin flips, half heads: sd of the mean = 0.5 / 20 = 0.025 -> 95% half-width ~ 0.049
    x = np.array([1.0, 0.0] * 200)
    est, lo, hi = stats.mean_ci([x])
    assert est == 0.5 and hi - lo == pytest.approx(2 * 1.96 * 0.025, rel=0.1)


def test_the_interval_is_deterministic():
    x = np.random.default_rng(1).random(30)
    assert stats.mean_ci([x]) == stats.mean_ci([x])


def test_verdict_words_follow_the_interval():
    assert stats.verdict(0.01, 0.2) == "better"
    assert stats.verdict(-0.2, -0.01) == "worse"
    assert stats.verdict(-0.1, 0.2) == "not distinguishable at this scale"


def test_slope_of_a_perfect_line_and_of_noise():
    s, lo, hi = stats.slope_ci([1, 2, 3, 4], [3.0, 2.5, 2.0, 1.5])
    assert s == pytest.approx(-0.5) and lo == pytest.approx(-0.5) and hi == pytest.approx(-0.5)
    s, lo, hi = stats.slope_ci([1, 2, 3, 4, 5, 6], [1.0, -1, 1, -1, 1, -1])
    assert lo < 0 < hi
    assert all(math.isnan(v) for v in stats.slope_ci([1, 2], [1.0, 2.0]))
    assert stats.slope_ci([1, 2, 3], [0.5, 0.5, 0.5]) == (0.0, 0.0, 0.0)  # flat: exact, not nan


def test_wilson_interval_hand_value():
    # 0 of 10: upper bound z^2 / (n + z^2) = 3.8415 / 13.8415
    p, lo, hi = stats.proportion_ci(0, 10)
    assert p == 0 and lo == 0 and hi == pytest.approx(1.959964**2 / (10 + 1.959964**2), rel=1e-4)


def test_welch_interval_of_seed_means():
    from rlvr.stats import welch_diff_ci

    # a = [1, 3]: mean 2, var 2 -> se^2 = 1; b = [0, 0]: no spread -> df = 1, t(0.975, 1) = 12.7062
    d, lo, hi = welch_diff_ci([1.0, 3.0], [0.0, 0.0])
    assert d == 2.0 and lo == pytest.approx(2 - 12.7062, abs=1e-3) and hi == pytest.approx(2 + 12.7062, abs=1e-3)
    # equal spreads, 3 values each: se^2 = 1/3 + 1/3, df = 4, t(0.975, 4) = 2.7764
    d, lo, hi = welch_diff_ci([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])
    assert d == pytest.approx(1.0) and hi - d == pytest.approx(2.7764 * (2 / 3) ** 0.5, abs=1e-3)
    assert welch_diff_ci([0.5, 0.5], [0.25, 0.25]) == (0.25, 0.25, 0.25)  # no spread at all: a point
    assert all(math.isnan(v) for v in welch_diff_ci([1.0], [0.0, 1.0]))  # one seed: no interval


def test_t_interval_of_the_mean_over_seeds():
    """Three seeds 0.2, 0.3, 0.4: mean 0.3, sd 0.1, se 0.1 / sqrt(3); t(0.975, 2) = 4.303."""
    est, lo, hi = stats.t_mean_ci([0.2, 0.3, 0.4])
    half = 4.302653 * 0.1 / 3 ** 0.5
    assert est == pytest.approx(0.3) and lo == pytest.approx(0.3 - half, abs=1e-6) and hi == pytest.approx(0.3 + half, abs=1e-6)
    assert stats.t_mean_ci([0.5, 0.5]) == (0.5, 0.5, 0.5)  # no spread: no width
    assert all(math.isnan(x) for x in stats.t_mean_ci([0.5]))  # one seed: no interval
