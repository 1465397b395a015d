"""The statistics a claim row reads: slopes of a steps.csv column over the
seeds and their differences, the band a stable slope stays in (and the
verdicts of a band and of a floor), per-step shares paired by step, and
paired differences over problems, each with its interval."""

from __future__ import annotations

import math

import numpy as np

from rlvr import stats


def points(m, key: str = "entropy") -> tuple[list[float], list[float]]:
    """(step, value) of a steps.csv column over every seed of a method."""
    xs, ys = [], []
    for rows in m.steps:
        x, y = points_of(rows, key)
        xs += x
        ys += y
    return xs, ys


def slope_diff(a, b, key: str = "entropy") -> tuple[float, float, float] | None:
    """Slope of a minus slope of b, with a normal interval from their t
    intervals; None where either never logged `key` (the claim does not apply)."""
    pa, pb = points(a, key), points(b, key)
    if not (pa[0] and pb[0]):
        return None
    sa, sb = stats.slope_ci(*pa), stats.slope_ci(*pb)
    return _gap(sa[0] - sb[0], sa, sb)


def _gap(d: float, a: tuple[float, float, float], b: tuple[float, float, float]) -> tuple[float, float, float]:
    """A difference `d` of two slopes with a normal interval from their t
    intervals `a` and `b`: each half-width is t x se, and the standard errors
    combine (t ~ z at these sizes is conservative enough); nan where either is."""
    if any(math.isnan(c) for c in (*a, *b)):
        return (math.nan,) * 3
    half = math.hypot((a[2] - a[1]) / 2, (b[2] - b[1]) / 2)
    return (d, d - half, d + half)


STABLE_SHARE = 0.2  # "stable": the entropy moves by less than this share of its start over the run


def band(m, key: str = "entropy") -> tuple[float, float, float, float] | None:
    """A method's slope per step of `key` with its interval, and the band a
    stable slope stays within: +-STABLE_SHARE of the first step's value over
    the run's steps; None where it never logged `key` (validation off)."""
    xs, ys = points(m, key)
    if not xs:
        return None
    est, lo, hi = stats.slope_ci(xs, ys)
    first = [y for x, y in zip(xs, ys) if x == min(xs)]
    bound = STABLE_SHARE * abs(float(np.mean(first))) / max(max(xs) - min(xs), 1)
    return est, lo, hi, bound


def late_slope_diff(a, b, key: str = "reward_mean") -> tuple[float, float, float]:
    """Slope of `key` over the second half of a's training minus b's, with a
    normal interval from their t intervals (a still rising where b has
    saturated)."""
    sa = stats.slope_ci(*_halves(*points(a, key))[1])
    sb = stats.slope_ci(*_halves(*points(b, key))[1])
    return _gap(sa[0] - sb[0], sa, sb)


def _halves(xs: list[float], ys: list[float]) -> tuple[tuple[list, list], tuple[list, list]]:
    """The (steps, values) up to the middle step of the run, and after it."""
    mid = (min(xs) + max(xs)) / 2 if xs else 0.0
    first = [(x, y) for x, y in zip(xs, ys) if x <= mid]
    second = [(x, y) for x, y in zip(xs, ys) if x > mid]
    return tuple(([x for x, _ in part], [y for _, y in part]) for part in (first, second))


def step_share_diff(a, b, key: str) -> tuple[float, float, float]:
    """a's per-step share `key` (a steps.csv column: all_wrong_groups, the
    official trainer's solve_none; all_correct_groups, its solve_all) minus
    b's, paired by step over the steps both logged (the same seed draws the
    same questions at a step), seeds pooled."""
    pa, pb = _by_step(a, key), _by_step(b, key)
    common = sorted(set(pa) & set(pb))
    if len(common) < 2:
        return (math.nan,) * 3
    return stats.paired_diff_ci([np.array([pa[s] for s in common])], [np.array([pb[s] for s in common])])


def _by_step(m, key: str) -> dict[tuple[int, float], float]:
    return {(seed, x): y for seed, rows in zip(m.seeds, m.steps) for x, y in zip(*points_of(rows, key))}


def points_of(rows: list[dict], key: str) -> tuple[list[float], list[float]]:
    """(step, value) of one seed's steps.csv column."""
    kept = [r for r in rows if isinstance(r.get(key), float)]
    return [r["step"] for r in kept], [r[key] for r in kept]


def halves_diff(m, key: str = "entropy") -> tuple[float, float, float]:
    """|slope| over the second half of training minus |slope| over the first,
    with a normal interval from their t intervals (late instability)."""
    xs, ys = points(m, key)
    if len(set(xs)) < 6:
        return (math.nan,) * 3
    first, second = (stats.slope_ci(*half) for half in _halves(xs, ys))
    return _gap(abs(second[0]) - abs(first[0]), first, second)


def mean_diff(a, b, kind: str, sets: tuple[str, ...] | None = None) -> tuple[float, float, float] | None:
    """a - b, paired over problems, mean over `sets` (default: the sets that
    are averaged, as the tables' mean); None when none of `sets` was
    evaluated (the claim does not apply)."""
    if not (a.has(kind) and b.has(kind)):
        return (math.nan,) * 3
    va, vb = a.values(kind), b.values(kind)
    sets = sets or a.mean_sets
    keys = [x for x in va if sets is None or x in sets]
    if not keys:
        return None
    return stats.paired_diff_ci([va[x] for x in keys], [vb[x] for x in keys])


def verdict(lo: float, hi: float) -> str:
    """A claim that a difference is above 0: the words its interval allows."""
    if math.isnan(lo):
        return "inconclusive (too few points)"
    return stats.verdict(lo, hi, better="supported", worse="contradicted").replace(
        "not distinguishable at this scale", "inconclusive")


def band_verdict(lo: float, hi: float, bound: float) -> str:
    """Stable: the interval inside +-bound; contradicted wholly outside it."""
    if math.isnan(lo):
        return "inconclusive (too few points)"
    if -bound <= lo and hi <= bound:
        return "supported"
    return "contradicted" if lo > bound or hi < -bound else "inconclusive"


def floor_verdict(lo: float, hi: float, bound: float) -> str:
    """Kept: the interval above -bound; contradicted wholly below it."""
    if math.isnan(lo):
        return "inconclusive (too few points)"
    return "supported" if lo >= -bound else "contradicted" if hi < -bound else "inconclusive"
