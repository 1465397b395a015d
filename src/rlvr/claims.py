"""The DisCO and SIREN papers' claims as statistics of this run, each with its
95% interval and a verdict: supported (the interval lies on the claimed
side), contradicted (on the other side) or inconclusive (it straddles).

The same table, fed from a paper recipe's outputs, is what a GPU user reads.
"""

from __future__ import annotations

import math

import numpy as np

from rlvr import stats
from rlvr.runs import BASE

ANCHOR_BAND = (0.5, 2.0)  # SIREN: late top-p entropy within this factor of the anchor = neither collapse nor explosion


def verdict(lo: float, hi: float) -> str:
    if math.isnan(lo):
        return "inconclusive (too few points)"
    return stats.verdict(lo, hi, better="supported", worse="contradicted").replace(
        "not distinguishable at this scale", "inconclusive")


ONE_SEED = " (one seed)"  # the interval covers the problems, not the randomness of training


def _seed_note(*runs) -> str:
    """ONE_SEED when any of the trained runs a claim rests on has a single seed."""
    return ONE_SEED if any(len(r.seeds) < 2 for r in runs) else ""


def _row(claim: str, statistic: str, cell: tuple[float, float, float], *runs) -> list[str]:
    """One claim; `runs` are the trained runs it compares."""
    est, lo, hi = cell
    return [claim, statistic, f"{est:+.4g} [{lo:+.4g}, {hi:+.4g}]", verdict(lo, hi) + _seed_note(*runs)]


def _entropy_points(m) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for rows in m.steps:
        for r in rows:
            if isinstance(r.get("entropy"), float):
                xs.append(r["step"])
                ys.append(r["entropy"])
    return xs, ys


def _slope_diff(a, b) -> tuple[float, float, float]:
    """Slope of a minus slope of b, with a normal interval from their t intervals."""
    sa, la, ha = stats.slope_ci(*_entropy_points(a))
    sb, lb, hb = stats.slope_ci(*_entropy_points(b))
    if math.isnan(sa) or math.isnan(sb):
        return (math.nan,) * 3
    # each half-width is t * se; combine the standard errors (t ~ z at these sizes is conservative enough)
    half = math.hypot((ha - la) / 2, (hb - lb) / 2)
    d = sa - sb
    return (d, d - half, d + half)


def _share_diff(a, b, level: float) -> tuple[float, float, float]:
    """Share of questions with seed-averaged accuracy == level: a minus b, paired over questions."""
    va = np.asarray(a.accuracy_by_question()) == level
    vb = np.asarray(b.accuracy_by_question()) == level
    return stats.paired_diff_ci([va.astype(float)], [vb.astype(float)])


def _mean_diff(a, b, kind: str) -> tuple[float, float, float]:
    va, vb = a.values(kind), b.values(kind)
    return stats.paired_diff_ci([va[x] for x in va], [vb[x] for x in va])


def _anchor_ratio(m) -> tuple[float, float, float]:
    """Late-training top-p entropy (the regularized aggregate) over the anchor."""
    ratios = []
    for rows in m.steps:
        anchor = next((r["entropy_anchor"] for r in rows if isinstance(r.get("entropy_anchor"), float)), None)
        late = [r["siren_entropy"] for r in rows[len(rows) // 2:] if isinstance(r.get("siren_entropy"), float)]
        if anchor and late:
            ratios += [v / anchor for v in late]
    if len(ratios) < 2:
        return (math.nan,) * 3
    from scipy import stats as st

    mean, se = float(np.mean(ratios)), float(np.std(ratios, ddof=1) / math.sqrt(len(ratios)))
    t = st.t.ppf(0.975, len(ratios) - 1)
    return (mean, mean - t * se, mean + t * se)


def claims_table(results: dict, objectives: dict[str, str], k: int) -> str | None:
    from rlvr.report import markdown

    rows = []
    grpo = results.get("grpo")
    disco = [n for n in results if objectives.get(n) == "disco"]
    for name in disco:
        if grpo:
            rows.append(_row(f"{name} above GRPO on accuracy", f"mean avg@{k}: {name} - grpo",
                             _mean_diff(results[name], grpo, "avg"), results[name], grpo))
    if grpo:
        slope, lo, hi = stats.slope_ci(*_entropy_points(grpo))
        rows.append(_row("GRPO's entropy falls during training", "minus the slope of entropy per step (grpo)",
                         (-slope, -hi, -lo), grpo))
    for name in disco:
        if grpo:
            rows.append(_row(f"{name}'s entropy stays stable while GRPO's falls",
                             f"entropy slope: {name} - grpo", _slope_diff(results[name], grpo), results[name], grpo))
        for ref in ("grpo", "grpo_rw"):
            if ref in results:
                pair = (results[name], results[ref])
                rows.append(_row(f"fewer questions at 0% under {name} than {ref}",
                                 f"share at 0%: {ref} - {name}", _share_diff(results[ref], results[name], 0.0), *pair))
                rows.append(_row(f"more questions at 100% under {name} than {ref}",
                                 f"share at 100%: {name} - {ref}", _share_diff(results[name], results[ref], 1.0), *pair))
    for name in [n for n in results if objectives.get(n) == "siren"]:
        est, lo, hi = _anchor_ratio(results[name])
        lo_band, hi_band = ANCHOR_BAND
        if math.isnan(lo):
            word = "inconclusive (too few points)"
        else:
            word = "supported" if lo >= lo_band and hi <= hi_band else \
                "contradicted" if hi < lo_band or lo > hi_band else "inconclusive"
        word += _seed_note(results[name])
        rows.append([f"{name} keeps its top-p entropy near the anchor (no collapse, no explosion)",
                     f"late top-p entropy / anchor, claimed within {lo_band}-{hi_band}",
                     f"{est:.3g} [{lo:.3g}, {hi:.3g}]", word])
        others = [n for n in results if n not in (name, BASE)]
        if others:
            best = max(others, key=lambda n: float(np.mean([v.mean() for v in results[n].values("maj").values()])))
            rows.append(_row(f"{name} gains maj@k over the best baseline", f"mean maj@{k}: {name} - {best}",
                             _mean_diff(results[name], results[best], "maj"), results[name], results[best]))
    if not rows:
        return None
    table = markdown(["claim", "statistic", "estimate [95% interval]", "verdict"], rows)
    if any(row[-1].endswith(ONE_SEED) for row in rows):
        table += ("\n\n(one seed): a run with a single seed; its interval covers the choice of problems, not the "
                  "randomness of training, which can be larger (`dvc exp run -S 'seeds=[0,1,2]'` measures it).")
    return table
