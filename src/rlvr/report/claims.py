"""The DisCO and SIREN papers' claims as statistics of this run, each with its
95% interval and a verdict: supported (the interval lies on the claimed
side), contradicted (on the other side) or inconclusive (it straddles).

The claims are data (CLAIMS): each names the objective whose methods it is
about, what it compares them with and the statistic; a new objective's
claims are rows added there.

The same table, fed from a paper recipe's outputs, is what a GPU user reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from rlvr import stats
from rlvr.report.format import markdown
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


@dataclass(frozen=True)
class Claim:
    """A paper's claim about the methods trained with one objective."""

    objective: str  # the claim is checked for every method with this objective
    text: str  # {name}: the method, {ref}: the method it is compared with
    statistic: str  # what the interval is of ({name}, {ref}, {k})
    measure: Callable  # (method's results, reference's results or None) -> (estimate, low, high)
    against: tuple[str, ...] = ()  # reference methods (those present); () the method alone; BEST the best other
    band: tuple[float, float] | None = None  # claimed: the estimate within this band (default: above 0)


BEST = ("<the best baseline on maj@k>",)

CLAIMS = (
    Claim("disco", "{name} above GRPO on accuracy", "mean avg@{k}: {name} - grpo",
          lambda a, b: _mean_diff(a, b, "avg"), against=("grpo",)),
    Claim("grpo", "GRPO's entropy falls during training", "minus the slope of entropy per step ({name})",
          lambda a, _: _negated(stats.slope_ci(*_entropy_points(a)))),
    Claim("disco", "{name}'s entropy stays stable while GRPO's falls", "entropy slope: {name} - grpo",
          _slope_diff, against=("grpo",)),
    Claim("disco", "fewer questions at 0% under {name} than {ref}", "share at 0%: {ref} - {name}",
          lambda a, b: _share_diff(b, a, 0.0), against=("grpo", "grpo_rw")),
    Claim("disco", "more questions at 100% under {name} than {ref}", "share at 100%: {name} - {ref}",
          lambda a, b: _share_diff(a, b, 1.0), against=("grpo", "grpo_rw")),
    Claim("siren", "{name} keeps its top-p entropy near the anchor (no collapse, no explosion)",
          "late top-p entropy / anchor, claimed within {lo}-{hi}", lambda a, _: _anchor_ratio(a), band=ANCHOR_BAND),
    Claim("siren", "{name} gains maj@k over the best baseline", "mean maj@{k}: {name} - {ref}",
          lambda a, b: _mean_diff(a, b, "maj"), against=BEST),
)


def _negated(cell: tuple[float, float, float]) -> tuple[float, float, float]:
    est, lo, hi = cell
    return (-est, -hi, -lo)


def _best_other(results: dict, name: str) -> list[str]:
    others = [n for n in results if n not in (name, BASE)]
    if not others:
        return []
    return [max(others, key=lambda n: float(np.mean([v.mean() for v in results[n].values("maj").values()])))]


def _band_row(claim: Claim, name: str, cell: tuple[float, float, float], run) -> list[str]:
    est, lo, hi = cell
    lo_band, hi_band = claim.band
    if math.isnan(lo):
        word = "inconclusive (too few points)"
    else:
        word = "supported" if lo >= lo_band and hi <= hi_band else \
            "contradicted" if hi < lo_band or lo > hi_band else "inconclusive"
    return [claim.text.format(name=name), claim.statistic.format(lo=lo_band, hi=hi_band),
            f"{est:.3g} [{lo:.3g}, {hi:.3g}]", word + _seed_note(run)]


def claim_rows(claim: Claim, results: dict, objectives: dict[str, str], k) -> list[list[str]]:
    rows = []
    for name in [n for n in results if objectives.get(n) == claim.objective]:
        if claim.against == BEST:
            refs = _best_other(results, name)
        elif claim.against:
            refs = [r for r in claim.against if r in results]
        else:
            refs = [None]  # the method alone
        for ref in refs:
            a, b = results[name], results.get(ref)
            cell = claim.measure(a, b)
            if claim.band:
                rows.append(_band_row(claim, name, cell, a))
            else:
                words = {"name": name, "ref": ref, "k": k}
                rows.append(_row(claim.text.format(**words), claim.statistic.format(**words), cell,
                                 *([a, b] if b is not None else [a])))
    return rows


def all_claim_rows(results: dict, objectives: dict[str, str], k) -> list[list[str]]:
    """[claim, statistic, estimate [interval], verdict] for every claim that applies."""
    return [row for claim in CLAIMS for row in claim_rows(claim, results, objectives, k)]


def claims_summary(rows: list[list[str]]) -> str:
    """One line per claim: its verdict first, then the claim and its estimate."""
    return "\n".join(f"- **{verdict}**: {claim} ({statistic}: {estimate})"
                      for claim, statistic, estimate, verdict in rows)


def claims_table(rows: list[list[str]]) -> str | None:
    if not rows:
        return None
    table = markdown(["claim", "statistic", "estimate [95% interval]", "verdict"], rows)
    if any(row[-1].endswith(ONE_SEED) for row in rows):
        table += ("\n\n(one seed): a run with a single seed; its interval covers the choice of problems, not the "
                  "randomness of training, which can be larger (`dvc exp run -S 'seeds=[0,1,2]'` measures it).")
    return table
