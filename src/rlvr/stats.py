"""Uncertainty of evaluation results: bootstrap intervals over problems.

A benchmark score is a mean over problems of a per-problem value (the share
of its k samples that are correct for avg@k; 0/1 for maj@k; the unbiased
estimate for pass@k). Resampling problems (their k samples stay together)
gives the interval of the mean; resampling the same problems for two runs
gives the interval of their paired difference. With several seeds the
per-problem value is first averaged over the seeds, so the interval covers
the problems' variance at that seed count; the seed spread is reported apart.
The mean over benchmarks resamples within each benchmark (stratified).
"""

from __future__ import annotations

import math

import numpy as np

N_BOOT = 2000
LEVEL = 0.95


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)  # fixed: the report is the same every time it is built


def boot_means(sets: list[np.ndarray], n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """[n_boot] bootstrap replicates of the mean over sets of each set's mean
    (one array of per-problem values per set, resampled within the set)."""
    rng = _rng(seed)
    reps = np.zeros(n_boot)
    for values in sets:
        idx = rng.integers(0, len(values), size=(n_boot, len(values)))
        reps += values[idx].mean(axis=1)
    return reps / len(sets)


def interval(reps: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def mean_ci(sets: list[np.ndarray], seed: int = 0) -> tuple[float, float, float]:
    """(estimate, low, high) of the mean over sets."""
    est = float(np.mean([v.mean() for v in sets]))
    return (est, *interval(boot_means(sets, seed=seed)))


def paired_diff_ci(a: list[np.ndarray], b: list[np.ndarray], seed: int = 0) -> tuple[float, float, float]:
    """(a - b, low, high): the same problems resampled for both (arrays aligned by problem)."""
    return mean_ci([x - y for x, y in zip(a, b)], seed=seed)


def verdict(lo: float, hi: float, better: str = "better", worse: str = "worse") -> str:
    """The words a paired interval allows."""
    if lo > 0:
        return better
    if hi < 0:
        return worse
    return "not distinguishable at this scale"


def slope_ci(xs: list[float], ys: list[float], level: float = LEVEL) -> tuple[float, float, float]:
    """Least-squares slope of ys over xs with its t interval ((nan,)*3 under 3 points)."""
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    if len(x) < 3 or np.ptp(x) == 0:
        return (math.nan, math.nan, math.nan)
    if np.ptp(y) == 0:  # a flat line is fitted exactly (scipy gives its standard error as nan)
        return (0.0, 0.0, 0.0)
    from scipy import stats as st

    fit = st.linregress(x, y)
    t = st.t.ppf((1 + level) / 2, len(x) - 2)
    return float(fit.slope), float(fit.slope - t * fit.stderr), float(fit.slope + t * fit.stderr)


def t_mean_ci(values: list[float], level: float = LEVEL) -> tuple[float, float, float]:
    """The mean of a small sample (each seed's score) with its t interval: where the
    mean over seeds lies, given the spread between them ((nan,)*3 under 2 values)."""
    v = np.asarray(values, float)
    if len(v) < 2:
        return (math.nan, math.nan, math.nan)
    m, se = float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v)))
    if se == 0:
        return (m, m, m)
    from scipy import stats as st

    t = float(st.t.ppf((1 + level) / 2, len(v) - 1))
    return m, m - t * se, m + t * se


def welch_diff_ci(a: list[float], b: list[float], level: float = LEVEL) -> tuple[float, float, float]:
    """mean(a) - mean(b) of two small samples (e.g. each seed's score) with Welch's t
    interval: what seed-to-seed variation allows ((nan,)*3 under 2 values each)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        return (math.nan, math.nan, math.nan)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    d, se = float(a.mean() - b.mean()), math.sqrt(va + vb)
    if se == 0:
        return (d, d, d)
    from scipy import stats as st

    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    t = float(st.t.ppf((1 + level) / 2, df))
    return d, d - t * se, d + t * se


def proportion_ci(hits: int, n: int, level: float = LEVEL) -> tuple[float, float, float]:
    """Wilson interval of a share (e.g. of questions at 0%)."""
    if n == 0:
        return (math.nan, math.nan, math.nan)
    from scipy import stats as st

    z = st.norm.ppf((1 + level) / 2)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (p, max(0.0, centre - half), min(1.0, centre + half))
