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
from rlvr.report.claim_stats import (
    band,
    band_verdict,
    floor_verdict,
    halves_diff,
    late_slope_diff,
    mean_diff,
    points,
    slope_diff,
    step_share_diff,
    verdict,
)
from rlvr.report.format import markdown
from rlvr.report.published import sourced
from rlvr.report.scale import PaperScale, RunScale, paper_of, scaled_verdict

ONE_SEED = " (one seed)"  # the interval covers the problems, not the randomness of training


def _seed_note(*runs) -> str:
    """ONE_SEED when any of the trained runs a claim rests on has a single seed."""
    return ONE_SEED if any(len(r.seeds) < 2 for r in runs) else ""


@dataclass(frozen=True)
class Claim:
    """A paper's claim about the main method of one objective (never an
    ablation variant, nor a released checkpoint)."""

    objective: str  # the claim is checked for the recipe's methods with this objective
    text: str  # {name}: the method, {ref}: the method it is compared with
    statistic: str  # what the interval is of ({name}, {ref}, {k})
    measure: Callable  # (method's results, reference's results or None) -> (estimate, low, high), None: n/a
    against: tuple[str, ...] = ()  # reference methods (those present); () the method alone; BEST the best baseline
    # the published size of the same statistic: (the profile's entry, name, ref) -> value, or None
    published: Callable[[dict, str, str | None], float | None] = lambda entry, name, ref: None
    baselines: tuple[str, ...] = ()  # for BEST: the objectives of the paper's baselines it is chosen among
    # "interval": supported when the interval lies above 0; "band": the measure gives (est, lo, hi, bound)
    # and a claim of stability is supported when the interval lies within +-bound, contradicted outside it;
    # "floor": a claim that a value is kept, supported when the interval lies above -bound, contradicted below
    kind: str = "interval"
    source: str = ""  # where the paper states the claim (a threshold it does not state is named in `statistic`)
    methods: tuple[str, ...] = ()  # only these methods of the objective (a sweep's named coefficients); (): all


BEST = ("<the best baseline on maj@k>",)
# SIREN's baselines (its tables). A direction is asserted only where the paper states one: the abstract says
# naive entropy regularization "can easily trigger a global entropy explosion"; the unregularized objectives
# (GRPO, and Dr. GRPO, SIREN's `baseline` experiment) are the entropy collapse SIREN is built against. Clip-Cov,
# KL-Cov, Entropy-Adv and 80/20 are designed against collapse: no direction is assumed for them, and they are
# compared with SIREN on accuracy only (the best baseline).
SIREN_COLLAPSE = ("grpo", "dr_grpo")
SIREN_EXPLOSION = ("entropy_reg", "entropy_reg_large")
SIREN_BASELINES = ("grpo", "dr_grpo", "clip_cov", "kl_cov", "entropy_adv", "forking_80_20", "entropy_reg")
DISCO_BASELINES = ("grpo", "grpo_rw", "grpo_er", "dr_grpo", "dapo", "trpa")
DISCO_FIG2_BASELINES = ("grpo", "grpo_er", "dr_grpo", "dapo", "trpa")  # the methods of its training-dynamics figure

# where each claim is stated
DISCO_README = "DisCO README lines 43-48 (1.5B: +7% vs GRPO, +6% vs DAPO); its 1.5B / 7B tables"
DISCO_FIG2 = "DisCO Fig. 2, training reward and entropy vs step (README line 80)"
DISCO_PROP1 = ("DisCO Prop. 1 (difficulty bias); the official trainer logs it per training batch "
               "(solve_none / solve_all)")
DISCO_DSR = ("DisCO README line 48: DisCO at 8k is \"on par with or even better than\" GRPO at 32k; "
             "its 1.5B table's DeepScaleR-1.5B-Preview 24k/32k row")
SIREN_ABSTRACT = "SIREN abstract (arXiv 2509.25133)"
SIREN_DIVERSITY = "SIREN paper, its diversity analysis"
SIREN_SWEEP = ("a secondary summary of the SIREN paper (small coefficients: no gain; large: meaningless tokens); "
               "not in the official repository")


def table_gain(entry: dict, name: str, ref: str | None, ref_mrl: str | None = None) -> float | None:
    """The paper's avg difference name - ref, from its table's rows (the
    first row of each; of ref, the row with `ref_mrl` where given); None
    where the rows have no source."""
    if not sourced(entry):
        return None
    avg = {}
    for row in entry.get("rows", []):
        if row["method"] != ref or ref_mrl is None or row.get("mrl") == ref_mrl:
            avg.setdefault(row["method"], row.get("avg"))
    if ref is None or avg.get(name) is None or avg.get(ref) is None:
        return None
    return avg[name] - avg[ref]


def headline_gain(key: str):
    """A gain the paper states in points (headline figures), as a fraction; None without a source."""
    def gain(entry: dict, name: str, ref: str | None) -> float | None:
        value = (entry.get("headline") or {}).get(key) if sourced(entry, key) else None
        return None if value is None else value / 100
    return gain


def _slope(key: str, sign: float = 1.0):
    """The method's own slope of `key` per step, times `sign` (-1: a fall is positive)."""
    def measure(a, _):
        est, lo, hi = stats.slope_ci(*points(a, key))
        return (est, lo, hi) if sign > 0 else _negated((est, lo, hi))
    return measure


def _entropy_falls(objective: str, label: str, **kw) -> Claim:
    return Claim(objective, f"{label}'s entropy falls during training", "minus the slope of entropy per step ({name})",
                 _slope("entropy", -1.0), **kw)


STABLE = "(our band: 20% of the first step's value over the run; the paper states none)"

CLAIMS = (
    Claim("disco", "{name} above {ref} on accuracy", "mean avg@{k}: {name} - {ref}",
          lambda a, b: mean_diff(a, b, "avg"), against=("grpo", "dapo"), published=table_gain, source=DISCO_README),
    # DisCO's Fig. 2: GRPO's and GRPO-ER's / Dr. GRPO's entropy collapses, DAPO's grows, DisCO's stays
    # stable, TRPA turns unstable late in training; DisCO's reward keeps rising while the baselines' saturate
    _entropy_falls("grpo", "GRPO", source=DISCO_FIG2),
    _entropy_falls("grpo_er", "GRPO-ER", source=DISCO_FIG2),
    _entropy_falls("dr_grpo", "Dr. GRPO", source=DISCO_FIG2),
    Claim("dapo", "DAPO's entropy rises during training", "slope of entropy per step ({name})", _slope("entropy"),
          source=DISCO_FIG2),
    Claim("disco", "{name}'s entropy stays stable", "entropy slope per step ({name}), within +-{band} for stable "
          + STABLE, lambda a, _: band(a, "entropy"), kind="band", source=DISCO_FIG2),
    Claim("trpa", "TRPA's entropy moves more late in training", "|entropy slope|, second half - first half ({name})",
          lambda a, _: halves_diff(a, "entropy"), source=DISCO_FIG2),
    Claim("disco", "{name}'s training reward keeps rising where {ref}'s saturates",
          "training reward slope per step over the second half of training: {name} - {ref}",
          lambda a, b: late_slope_diff(a, b, "reward_mean"), against=DISCO_FIG2_BASELINES, source=DISCO_FIG2),
    # DisCO's difficulty bias (Prop. 1, Fig. 3): GRPO_RW, GRPO without its question weight, against GRPO, on the
    # training batches as the official trainer counts them (the evaluation problems' shares: the difficulty table)
    Claim("grpo_rw", "fewer all-wrong training groups under {name} than {ref}",
          "share of a step's groups with no correct response, paired by step: {ref} - {name}",
          lambda a, b: step_share_diff(b, a, "all_wrong_groups"), against=("grpo",), source=DISCO_PROP1),
    Claim("grpo_rw", "more all-correct training groups under {name} than {ref}",
          "share of a step's groups with every response correct, paired by step: {name} - {ref}",
          lambda a, b: step_share_diff(a, b, "all_correct_groups"), against=("grpo",), source=DISCO_PROP1),
    # SIREN: the entropy kept in a band, away from the baselines' collapse and from naive regularization's
    # explosion. Its trainer logs (and its figures plot) the rollouts' top-p entropy (ray_trainer.py 1006-1017).
    Claim("siren", "{name}'s top-p entropy stays in a band", "top-p entropy slope per step ({name}), within "
          "+-{band} for stable " + STABLE, lambda a, _: band(a, "topp_entropy"), kind="band",
          source=SIREN_ABSTRACT + ": entropy kept at an appropriate level"),
    Claim("siren", "{name}'s top-p entropy falls less than {ref}'s (no collapse)",
          "top-p entropy slope per step: {name} - {ref}", lambda a, b: slope_diff(a, b, "topp_entropy"),
          against=SIREN_COLLAPSE, source=SIREN_ABSTRACT),
    Claim("siren", "{name}'s top-p entropy rises less than {ref}'s (no explosion)",
          "top-p entropy slope per step: {ref} - {name}", lambda a, b: slope_diff(b, a, "topp_entropy"),
          against=SIREN_EXPLOSION, source=SIREN_ABSTRACT + ": naive regularization's global entropy explosion"),
    Claim("siren", "{name}'s full-vocabulary entropy falls less than {ref}'s (no collapse)",
          "entropy slope per step: {name} - {ref}", slope_diff, against=SIREN_COLLAPSE, source=SIREN_ABSTRACT),
    Claim("siren", "{name}'s full-vocabulary entropy rises less than {ref}'s (no explosion)",
          "entropy slope per step: {ref} - {name}", lambda a, b: slope_diff(b, a), against=SIREN_EXPLOSION,
          source=SIREN_ABSTRACT + ": naive regularization's global entropy explosion"),
    Claim("siren", "{name} keeps its validation pass@k through training", "validation pass@k slope per step "
          "({name}), above -{band} for kept (our floor: a fall of 20% of the first validation over the run; the "
          "paper states none)", lambda a, _: band(a, "val_pass@k"), kind="floor",
          source=SIREN_ABSTRACT + ": it helps to preserve the validation pass@k throughout training"),
    Claim("siren", "{name}'s validation pass@k falls less than {ref}'s", "validation pass@k slope per step: "
          "{name} - {ref}", lambda a, b: slope_diff(a, b, "val_pass@k"), against=SIREN_COLLAPSE,
          source=SIREN_ABSTRACT),
    # SIREN's diversity analysis, against the baselines whose entropy collapses (naive regularization's
    # explodes: more diverse samples there are not what the paper claims)
    Claim("siren", "{name}'s rollout perplexity falls less than {ref}'s", "perplexity slope per step: {name} - {ref}",
          lambda a, b: slope_diff(a, b, "perplexity"), against=SIREN_COLLAPSE, source=SIREN_DIVERSITY),
    Claim("siren", "{name} gives more distinct answers than {ref}", "distinct answers per problem: {name} - {ref}",
          lambda a, b: mean_diff(a, b, "distinct"), against=SIREN_COLLAPSE, source=SIREN_DIVERSITY),
    Claim("siren", "{name} gains maj@k over the best baseline", "mean maj@{k}: {name} - {ref}",
          lambda a, b: mean_diff(a, b, "maj"), against=BEST, baselines=SIREN_BASELINES,
          published=headline_gain("maj_at_k_gain_over_best_baseline"),
          source=SIREN_ABSTRACT + ": superior average performance over previous entropy-related RLVR approaches"),
    Claim("siren", "{name} gains maj@k on AIME24/25 over the best baseline", "mean maj@{k} on aime24, aime25: "
          "{name} - {ref}", lambda a, b: mean_diff(a, b, "maj", ("aime24", "aime25")), against=BEST,
          baselines=SIREN_BASELINES, published=headline_gain("aime24_25_maj_at_k_gain"),
          source=SIREN_ABSTRACT + ": +6.6 maj@k on AIME24/25 with Qwen2.5-Math-7B"),
    # SIREN's coefficient sensitivity (the sweep recipe siren_qwen2.5-math-7b_entropy_sweep): the direction of
    # naive regularization's entropy depends on its coefficient
    _entropy_falls("entropy_reg", "naive entropy regularization with a small coefficient ({name})",
                   methods=("entropy_reg_small",), source=SIREN_SWEEP),
    Claim("entropy_reg", "naive entropy regularization with a large coefficient ({name}): entropy rises",
          "slope of entropy per step ({name})", _slope("entropy"), methods=("entropy_reg_large",),
          source=SIREN_ABSTRACT + ": a global entropy explosion; " + SIREN_SWEEP),
    # DisCO's token efficiency: DisCO at 8k against DeepScaleR-1.5B-Preview trained at 24k and evaluated at 32k
    Claim("disco", "{name} (8k) on par with or above {ref} (24k training, 32k evaluation)",
          "mean avg@{k}: {name} - {ref}", lambda a, b: mean_diff(a, b, "avg"), against=("deepscaler_preview_32k",),
          published=lambda entry, name, ref: table_gain(entry, name, "deepscaler_preview", "24k/32k"),
          source=DISCO_DSR),
)


def _negated(cell: tuple[float, float, float]) -> tuple[float, float, float]:
    est, lo, hi = cell
    return (-est, -hi, -lo)


def _best_baseline(results: dict, objectives: dict[str, str], claim: Claim) -> list[str]:
    """The best of the paper's baselines trained here, on mean maj@k."""
    pool = [n for n in results if objectives.get(n) in claim.baselines and not results[n].external]
    if not pool:
        return []
    return [max(pool, key=lambda n: float(np.mean([v.mean() for v in results[n].values("maj").values()])))]


def published_cell(size: float | None, lo: float, hi: float) -> str:
    """The paper's size of the statistic, and whether our interval holds it."""
    if size is None:
        return "–"
    if math.isnan(lo):
        return f"{size:+.3g}"
    return f"{size:+.3g} ({'inside' if lo <= size <= hi else 'outside'} ours)"


def claim_rows(claim: Claim, results: dict, objectives: dict[str, str], k, entry: dict,
               variants: frozenset = frozenset(), scale: RunScale | None = None) -> list[list[str]]:
    """The claim's rows; `scale` (None: the run is taken to be at the paper's) words each
    verdict for a run far from the paper's scale (rlvr.report.scale)."""
    rows = []
    mains = [n for n in results if objectives.get(n) == claim.objective and n not in variants
             and not results[n].external and (not claim.methods or n in claim.methods)]
    for name in mains:
        if claim.against == BEST:
            refs = _best_baseline(results, objectives, claim)
        elif claim.against:
            refs = [r for r in claim.against if r in results and r not in variants]
        else:
            refs = [None]  # the method alone
        for ref in refs:
            a, b = results[name], results.get(ref)
            cell = claim.measure(a, b)
            if cell is None:  # the sets the claim is about were not evaluated
                continue
            words = {"name": name, "ref": ref, "k": k}
            trained = [r for r in (a, b) if r is not None and not r.external]
            if claim.kind in ("band", "floor"):
                est, lo, hi, bound = cell
                words["band"] = f"{bound:.3g}"
                judge = band_verdict if claim.kind == "band" else floor_verdict
                said = judge(lo, hi, bound)
            else:
                est, lo, hi = cell
                said = verdict(lo, hi)
            at_scale = scale is None or scale.at(paper_of(claim.source), name)
            verdict_text = scaled_verdict(said, at_scale) + _seed_note(*trained)
            estimate = f"{est:+.4g} [{lo:+.4g}, {hi:+.4g}]"
            rows.append([claim.text.format(**words), claim.statistic.format(**words), estimate,
                         published_cell(claim.published(entry, name, ref), lo, hi), verdict_text,
                         claim.source or "-"])
    return rows


def all_claim_rows(results: dict, objectives: dict[str, str], k, entry: dict | None = None,
                   variants=(), scale: RunScale | None = None) -> list[list[str]]:
    """[claim, statistic, estimate [interval], published size, verdict, source] for every
    claim that applies to a recipe's main methods (`variants`: its ablation
    variants, report.ablations, which no claim is about); `entry` is the paper
    profile's published numbers."""
    return [row for claim in CLAIMS
            for row in claim_rows(claim, results, objectives, k, entry or {}, frozenset(variants), scale)]


def claimed_papers(rows: list[list[str]]) -> list[PaperScale]:
    """The papers whose claims the rows check, in order."""
    return list({paper_of(row[5]).name: paper_of(row[5]) for row in rows}.values())


def claims_summary(rows: list[list[str]]) -> str:
    """One line per claim: its verdict first, then the claim and its estimate."""
    return "\n".join(f"- **{verdict}**: {claim} ({statistic}: {estimate}"
                      + ("" if published == "–" else f"; published {published}") + ")"
                      for claim, statistic, estimate, published, verdict, _ in rows)


def claims_table(rows: list[list[str]]) -> str | None:
    if not rows:
        return None
    table = markdown(["claim", "statistic", "estimate [95% interval]", "published", "verdict", "where the paper "
                      "states it"], rows)
    if any(row[4].endswith(ONE_SEED) for row in rows):
        table += ("\n\n(one seed): a run with a single seed; its interval covers the choice of problems, not the "
                  "randomness of training, which can be larger (`dvc exp run -S 'seeds=[0,1,2]'` measures it).")
    return table
