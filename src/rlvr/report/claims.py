"""The DisCO and SIREN papers' claims as statistics of this run, each with its
95% interval and a verdict: supported (the interval lies on the claimed
side), contradicted (on the other side) or inconclusive (it straddles).
Each claim is tested on the statistic the paper argues from, against the
comparison it makes; where the paper states a size (its tables' difference, or
a headline gain), the row sets it beside ours and says whether our interval
holds it.

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


def _points(m, key: str = "entropy") -> tuple[list[float], list[float]]:
    """(step, value) of a steps.csv column over every seed of a method."""
    xs, ys = [], []
    for rows in m.steps:
        for r in rows:
            if isinstance(r.get(key), float):
                xs.append(r["step"])
                ys.append(r[key])
    return xs, ys


def _slope_diff(a, b, key: str = "entropy") -> tuple[float, float, float]:
    """Slope of a minus slope of b, with a normal interval from their t intervals."""
    sa, la, ha = stats.slope_ci(*_points(a, key))
    sb, lb, hb = stats.slope_ci(*_points(b, key))
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


def _mean_diff(a, b, kind: str, sets: tuple[str, ...] | None = None) -> tuple[float, float, float] | None:
    """a - b, paired over problems, mean over `sets` (default: every set); None
    when none of `sets` was evaluated (the claim does not apply)."""
    if not (a.has(kind) and b.has(kind)):
        return (math.nan,) * 3
    va, vb = a.values(kind), b.values(kind)
    keys = [x for x in va if sets is None or x in sets]
    if not keys:
        return None
    return stats.paired_diff_ci([va[x] for x in keys], [vb[x] for x in keys])


@dataclass(frozen=True)
class Claim:
    """A paper's claim about the methods trained with one objective."""

    objective: str  # the claim is checked for every method with this objective
    text: str  # {name}: the method, {ref}: the method it is compared with
    statistic: str  # what the interval is of ({name}, {ref}, {k})
    measure: Callable  # (method's results, reference's results or None) -> (estimate, low, high), None: n/a
    against: tuple[str, ...] = ()  # reference methods (those present); () the method alone; BEST the best other
    # the published size of the same statistic: (the profile's entry, name, ref) -> value, or None
    published: Callable[[dict, str, str | None], float | None] = lambda entry, name, ref: None


BEST = ("<the best baseline on maj@k>",)
# SIREN's baselines (its tables): the claims about entropy compare SIREN with each one present
SIREN_BASELINES = ("grpo", "dr_grpo", "entropy_reg", "clip_cov", "kl_cov", "entropy_adv", "forking_80_20")


def table_gain(entry: dict, name: str, ref: str | None) -> float | None:
    """The paper's avg difference name - ref, from its table's rows (first row of each)."""
    avg = {}
    for row in entry.get("rows", []):
        avg.setdefault(row["method"], row.get("avg"))
    if ref is None or avg.get(name) is None or avg.get(ref) is None:
        return None
    return avg[name] - avg[ref]


def headline_gain(key: str):
    """A gain the paper states in points (headline figures), as a fraction."""
    def gain(entry: dict, name: str, ref: str | None) -> float | None:
        value = (entry.get("headline") or {}).get(key)
        return None if value is None else value / 100
    return gain

CLAIMS = (
    Claim("disco", "{name} above {ref} on accuracy", "mean avg@{k}: {name} - {ref}",
          lambda a, b: _mean_diff(a, b, "avg"), against=("grpo", "dapo"), published=table_gain),
    Claim("grpo", "GRPO's entropy falls during training", "minus the slope of entropy per step ({name})",
          lambda a, _: _negated(stats.slope_ci(*_points(a)))),
    Claim("disco", "{name}'s entropy stays stable while GRPO's falls", "entropy slope: {name} - grpo",
          _slope_diff, against=("grpo",)),
    Claim("disco", "fewer questions at 0% under {name} than {ref}", "share at 0%: {ref} - {name}",
          lambda a, b: _share_diff(b, a, 0.0), against=("grpo", "grpo_rw")),
    Claim("disco", "more questions at 100% under {name} than {ref}", "share at 100%: {name} - {ref}",
          lambda a, b: _share_diff(a, b, 1.0), against=("grpo", "grpo_rw")),
    # SIREN's trainer logs (and its figures plot) the top-p entropy of the rollouts, actor/entropy
    # (ray_trainer.py 1006-1017): the paper's claim is that it stays stable where the baselines' collapses
    Claim("siren", "{name}'s top-p entropy falls less than {ref}'s", "top-p entropy slope per step: {name} - {ref}",
          lambda a, b: _slope_diff(a, b, "topp_entropy"), against=SIREN_BASELINES),
    Claim("siren", "{name}'s full-vocabulary entropy falls less than {ref}'s", "entropy slope per step: {name} - {ref}",
          _slope_diff, against=SIREN_BASELINES),
    # SIREN's diversity analysis: perplexity does not collapse, answers stay diverse
    Claim("siren", "{name}'s rollout perplexity falls less than {ref}'s", "perplexity slope per step: {name} - {ref}",
          lambda a, b: _slope_diff(a, b, "perplexity"), against=SIREN_BASELINES),
    Claim("siren", "{name} gives more distinct answers than {ref}", "distinct answers per problem: {name} - {ref}",
          lambda a, b: _mean_diff(a, b, "distinct"), against=SIREN_BASELINES),
    Claim("siren", "{name} gains maj@k over the best baseline", "mean maj@{k}: {name} - {ref}",
          lambda a, b: _mean_diff(a, b, "maj"), against=BEST,
          published=headline_gain("maj_at_k_gain_over_best_baseline")),
    Claim("siren", "{name} gains maj@k on AIME24/25 over the best baseline", "mean maj@{k} on aime24, aime25: "
          "{name} - {ref}", lambda a, b: _mean_diff(a, b, "maj", ("aime24", "aime25")), against=BEST,
          published=headline_gain("aime24_25_maj_at_k_gain")),
)


def _negated(cell: tuple[float, float, float]) -> tuple[float, float, float]:
    est, lo, hi = cell
    return (-est, -hi, -lo)


def _best_other(results: dict, name: str) -> list[str]:
    others = [n for n in results if n not in (name, BASE) and not results[n].external]  # baselines trained here
    if not others:
        return []
    return [max(others, key=lambda n: float(np.mean([v.mean() for v in results[n].values("maj").values()])))]


def published_cell(size: float | None, lo: float, hi: float) -> str:
    """The paper's size of the statistic, and whether our interval holds it."""
    if size is None:
        return "–"
    if math.isnan(lo):
        return f"{size:+.3g}"
    return f"{size:+.3g} ({'inside' if lo <= size <= hi else 'outside'} ours)"


def claim_rows(claim: Claim, results: dict, objectives: dict[str, str], k, entry: dict) -> list[list[str]]:
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
            if cell is None:  # the sets the claim is about were not evaluated
                continue
            est, lo, hi = cell
            words = {"name": name, "ref": ref, "k": k}
            row = _row(claim.text.format(**words), claim.statistic.format(**words), (est, lo, hi),
                       *([a, b] if b is not None else [a]))
            rows.append([*row[:3], published_cell(claim.published(entry, name, ref), lo, hi), row[3]])
    return rows


def all_claim_rows(results: dict, objectives: dict[str, str], k, entry: dict | None = None) -> list[list[str]]:
    """[claim, statistic, estimate [interval], published size, verdict] for every
    claim that applies; `entry` is the paper profile's published numbers."""
    return [row for claim in CLAIMS for row in claim_rows(claim, results, objectives, k, entry or {})]


def claims_summary(rows: list[list[str]]) -> str:
    """One line per claim: its verdict first, then the claim and its estimate."""
    return "\n".join(f"- **{verdict}**: {claim} ({statistic}: {estimate}"
                      + ("" if published == "–" else f"; published {published}") + ")"
                      for claim, statistic, estimate, published, verdict in rows)


def claims_table(rows: list[list[str]]) -> str | None:
    if not rows:
        return None
    table = markdown(["claim", "statistic", "estimate [95% interval]", "published", "verdict"], rows)
    if any(row[-1].endswith(ONE_SEED) for row in rows):
        table += ("\n\n(one seed): a run with a single seed; its interval covers the choice of problems, not the "
                  "randomness of training, which can be larger (`dvc exp run -S 'seeds=[0,1,2]'` measures it).")
    return table
