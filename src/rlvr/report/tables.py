"""The report's tables, each a function of the loaded results (rlvr.report.inputs)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from rlvr import stats
from rlvr.report.claim_stats import verdict
from rlvr.report.format import Cell, fmt, markdown
from rlvr.report.inputs import DIVERSITY, MethodResults
from rlvr.report.seeds import seeds_lead
from rlvr.runs import BASE


def score_table(results: dict[str, MethodResults], kind: str) -> tuple[list[str], dict[str, list[Cell]]]:
    """Per method: (estimate, 95% interval) for each benchmark, then the mean
    over the sets (mean_sets)."""
    benches, averaged = next(iter(results.values())).benchmarks, mean_sets(results)
    rows = {}
    for name, m in results.items():
        vals = m.values(kind)
        rows[name] = [stats.mean_ci([vals[b]]) for b in benches] + [stats.mean_ci([vals[b] for b in averaged])]
    return benches + ["mean"], rows


def mean_sets(results) -> list[str]:
    """What a mean over sets averages: every evaluated set, as the evaluation's
    own mean (metrics.json, MLflow) and `dvc exp show` do, so that the mean is
    one number wherever it is shown. A set where every model scores the same
    adds the same to every mean and moves no difference (uninformative_note)."""
    return next(iter(results.values())).benchmarks


def paired(a: MethodResults, b: MethodResults, kind: str, bench: str | None, sets: list[str] | None = None) -> Cell:
    """a - b on the same problems: one benchmark, or the mean over `sets` (bench None; all when None)."""
    va, vb = a.values(kind), b.values(kind)
    keys = [bench] if bench else (sets or list(va))
    return stats.paired_diff_ci([va[k] for k in keys], [vb[k] for k in keys])


def best_marks(results: dict[str, MethodResults], kind: str, columns: list[str],
               rows: dict[str, list[Cell]]) -> dict[str, str]:
    """Column -> the method that is best there, its lead over the runner-up
    holding over problems and over seeds (lead_verdict; no mark where the top
    two cannot be told apart); `rows`: score_table's."""
    marks = {}
    for j, col in enumerate(columns):
        ranked = sorted(rows, key=lambda n: rows[n][j][0], reverse=True)
        if len(ranked) < 2:
            continue
        bench = None if col == "mean" else col
        a, b = results[ranked[0]], results[ranked[1]]
        if lead_verdict(paired(a, b, kind, bench, mean_sets(results)), seeds_lead(a, b, kind, bench)) == "better":
            marks[col] = ranked[0]
    return marks


def lead_verdict(over_problems: Cell, over_seeds: Cell | None) -> str:
    """What a lead allows: better or worse where its paired interval over problems
    excludes 0 and, with several seeds, the interval over the seeds' scores (Welch)
    agrees; a lead over problems that seeds could reorder is named as such. The
    interval over problems covers which problems were asked, not the randomness of
    training: with seeds measured, both must hold."""
    words = stats.verdict(over_problems[1], over_problems[2])
    if over_seeds is None or words == stats.verdict(0, 0):
        return words
    return words if stats.verdict(over_seeds[1], over_seeds[2]) == words else "within the spread between seeds"


def scores_section(results, kind: str, paper_rows: list[list[str]],
                   table: tuple[list[str], dict[str, list[Cell]]]) -> tuple[str, dict]:
    """`table`: score_table(results, kind)."""
    cols, rows = table
    marks = best_marks(results, kind, cols, rows)
    body = [[results[name].label, *[f"**{fmt(c)}**" if marks.get(col) == name else fmt(c)
                                    for col, c in zip(cols, cells)]]
            for name, cells in rows.items()]
    return markdown(["method", *cols], body + paper_rows), {"columns": cols, "rows": rows, "best": marks}


def gains_section(results, kind: str, reference: str) -> str | None:
    if reference not in results:
        return None
    others = [n for n in results if n not in (reference, BASE)]
    if not others:
        return None
    cols = results[reference].benchmarks + ["mean"]
    body, seeded = [], False
    for name in others:
        a, b = results[name], results[reference]
        cells = [paired(a, b, kind, None if c == "mean" else c, mean_sets(results)) for c in cols]
        over_seeds = seeds_lead(a, b, kind)
        seeded |= over_seeds is not None
        body.append([name, *[fmt(c, signed=True) for c in cells],
                     fmt(over_seeds, signed=True) if over_seeds else "–", lead_verdict(cells[-1], over_seeds)])
    if not seeded:
        body = [row[:-2] + row[-1:] for row in body]
    return markdown(["method", *cols, *(["mean over seeds (Welch)"] if seeded else []), "mean: verdict"], body)


def ablation_section(results, ablations: dict[str, str], k, published: dict | None = None) -> str | None:
    """Each ablated variant against its full method, paired over problems: the
    mean over sets of avg@k and maj@k (variant - full), with intervals, and the
    paper's size of the same change where it states one (`published`:
    {variant: {"avg"|"maj": points}}), inside or outside our interval."""
    pairs = [(v, full) for v, full in ablations.items() if v in results and full in results]
    if not pairs:
        return None
    published = published or {}
    body = []
    for variant, full in pairs:
        cells = [paired(results[variant], results[full], kind, None, mean_sets(results)) for kind in ("avg", "maj")]
        stated = published.get(variant) or {}
        sizes = [published_size(stated.get(kind), c) for kind, c in zip(("avg", "maj"), cells)]
        words = [lead_verdict(c, seeds_lead(results[variant], results[full], kind)) for kind, c in zip(("avg", "maj"), cells)]
        body.append([variant, full, *[f"{fmt(c, signed=True)}: {w}" for c, w in zip(cells, words)],
                     "; ".join(f"{kind}@{k} {size}" for kind, size in zip(("avg", "maj"), sizes) if size) or "–"])
    return markdown(["variant", "full method", f"avg@{k}: variant - full", f"maj@{k}: variant - full",
                     "published"], body)


def ablation_order(results, ablations: dict[str, str], order: dict | None, k) -> str | None:
    """The paper's ordering of its ablations (`order`: the profile's
    ablation_order): every component matters, each variant below its full
    method on avg@k; the variant it names hurts most, its drop (full -
    variant) larger than each other variant's, paired over problems."""
    pairs = dict((v, f) for v, f in ablations.items() if v in results and f in results)
    worst = (order or {}).get("largest_drop")
    if not pairs or worst not in pairs:
        return None
    sets = mean_sets(results)
    below = [v for v, f in pairs.items() if paired(results[v], results[f], "avg", None, sets)[2] < 0]
    source = order.get("source", "-")
    rows = [["every component matters", f"variants whose avg@{k} interval lies below their full method's",
             f"{len(below)} of {len(pairs)}", "supported" if len(below) == len(pairs) else "not shown for "
             + ", ".join(v for v in pairs if v not in below), source]]
    drop = {v: [results[f].values("avg")[b] - results[v].values("avg")[b] for b in sets] for v, f in pairs.items()}
    for other in pairs:
        if other != worst:
            cell = stats.paired_diff_ci(drop[worst], drop[other])
            rows.append([f"{worst} hurts more than {other}", f"avg@{k} drop (full - variant): {worst} - {other}",
                         fmt(cell, signed=True), verdict(cell[1], cell[2]), source])
    return markdown(["claim", "statistic", "estimate [95% interval]", "verdict", "where the paper states it"], rows)


def published_size(points: float | None, cell) -> str | None:
    """A change the paper states in points, as a fraction, and whether our interval holds it."""
    if points is None:
        return None
    size = points / 100
    return f"{size:+.3g} ({'inside' if cell[1] <= size <= cell[2] else 'outside'} ours)"


def diversity_section(results, k) -> str | None:
    """SIREN's diversity analysis: per method, distinct answers among a problem's
    k samples and the samples' perplexity under the model, with 95% intervals."""
    shown = {n: m for n, m in results.items() if all(m.has(kind) for kind in DIVERSITY)}
    if not shown:
        return None
    body = []
    for name, m in shown.items():
        cells = [stats.mean_ci(list(m.values(kind).values())) for kind in DIVERSITY]
        body.append([name, *[fmt(c) for c in cells]])
    return markdown(["method", f"distinct answers among {k} samples", "perplexity of the samples"], body)


def level_section(results, k: int) -> tuple[str, dict[str, dict[str, float]]] | None:
    """Arithmetic accuracy per difficulty level (mean over seeds), and each method's gain over base."""
    levels = defaultdict(dict)
    for name, m in results.items():
        per_level = defaultdict(list)
        for metrics in m.metrics:
            for lv, lm in metrics["benchmarks"].get("arithmetic", {}).get("levels", {}).items():
                per_level[lv].append(lm[f"avg@{k}"])
        levels[name] = {lv: float(np.mean(v)) for lv, v in per_level.items()}
    keys = sorted({lv for v in levels.values() for lv in v}, key=int)
    if not keys:
        return None
    body = [[n, *[f"{v.get(lv, float('nan')):.3f}" for lv in keys]] for n, v in levels.items()]
    gains = {n: {lv: v[lv] - levels[BASE].get(lv, 0.0) for lv in v} for n, v in levels.items()
             if n != BASE and BASE in levels}
    return markdown(["method", *[f"L{lv}" for lv in keys]], body), gains


def difficulty_section(results) -> str:
    body = []
    for name, m in results.items():
        acc = m.accuracy_by_question()
        zero, hundred = sum(a == 0 for a in acc), sum(a == 1 for a in acc)
        z, h = stats.proportion_ci(zero, len(acc)), stats.proportion_ci(hundred, len(acc))
        body.append([name, f"{z[0]:.1%} [{z[1]:.1%}, {z[2]:.1%}]", f"{h[0]:.1%} [{h[1]:.1%}, {h[2]:.1%}]",
                     str(len(acc))])
    return markdown(["method", "questions at 0%", "questions at 100%", "questions"], body)


def uninformative_sets(results, kind: str = "avg") -> list[str]:
    """The sets on which every method, the base model included, scores the same
    0 (or 1) on every problem: at this scale they say nothing about the methods."""
    benches = next(iter(results.values())).benchmarks
    out = []
    for b in benches:
        values = np.concatenate([m.values(kind)[b] for m in results.values()])
        if values.size and (np.all(values == 0) or np.all(values == 1)):
            out.append(b)
    return out


def uninformative_note(results) -> str | None:
    """Said up front: which sets carry no information at this scale, and why."""
    sets = uninformative_sets(results)
    if not sets:
        return None
    values = next(iter(results.values())).values("avg")
    named = ", ".join(f"{b} ({len(values[b])} problem{'s' * (len(values[b]) != 1)}, all at {values[b][0]:.3f})"
                      for b in sets)
    return (f"No information at this scale: {named}. Every method, the base model included, scores the same on "
            "every problem there, so the set only exercises its benchmark path and its column says nothing "
            "about the methods. It still counts in every mean over sets, as in MLflow and `dvc exp show` (one "
            "mean everywhere): there it lowers every model's mean alike and changes no difference's sign.")


GRADER_NAMES = ("math_verify: ours, math-verify with the final run of boxes, percentages and letters read; "
                "deepscaler: DisCO's grader; siren_official: SIREN's; verifier.grader")


def intro(results) -> str:
    m = next(iter(results.values()))
    sizes = ", ".join(f"{b}: {len(v)}" for b, v in m.values("avg").items())
    per_set = m.metrics[0].get("k_per_set") or {}
    k_text = f"k = {m.k}" if m.k != "k" else "k per set: " + ", ".join(f"{b} {v}" for b, v in per_set.items())
    seeds = {n: len(r.seeds) for n, r in results.items() if n != BASE and not r.external}
    released = [n for n, r in results.items() if r.external]
    graders = sorted({x.get("grader", "math_verify") for r in results.values() for x in r.metrics})
    return (f"Graded by {' and '.join(graders)} ({GRADER_NAMES}). "
            f"{k_text} samples per problem; problems per set: {sizes}; seeds per method: "
            f"{', '.join(f'{n} {s}' for n, s in seeds.items()) or 'none'}. Each score is followed by its 95% "
            "bootstrap interval over problems (the k samples of a problem resampled together; with several "
            "seeds, the seed-averaged problem). Bold marks a column's best only where its interval over the "
            "runner-up excludes 0. A difference whose interval contains 0 is not distinguishable at this scale."
            + (" With several seeds, a lead must also hold over the seeds' scores (Welch's t interval, the "
               "column 'mean over seeds'): one that seeds could reorder is 'within the spread between seeds'."
               if any(s > 1 for s in seeds.values()) else "")
            + (" With one seed per method, the intervals cover the choice of problems, not the randomness of "
               "training: a difference between two trained methods describes these runs, and seeds of one method "
               "can differ by more (`dvc exp run -S 'seeds=[0,1,2]'` measures it)."
               if any(s < 2 for s in seeds.values()) else "")
            + (f" Rows marked (released checkpoint) are published models evaluated here with the same settings, "
               f"not trained: {', '.join(released)} (`checkpoints:`)." if released else ""))


def agreement_section(agreement: dict) -> str:
    """The grader_agreement stage's counts: ours against each paper's grader, and a few disagreements."""
    names = {"run_samples": "this run's samples", "synthetic": "synthetic endings"}
    rows, examples = [], []
    for where, res in ((k, v) for k, v in agreement.items() if k in names):
        for grader, p in res["pairs"].items():
            agree = (p["both"] + p["neither"]) / res["n"] if res["n"] else 0.0
            rows.append([f"{names[where]} ({res['n']})", grader, f"{res['correct']['math_verify']} / "
                         f"{res['correct'][grader]}", str(p["both"]), str(p["ours_only"]), str(p["theirs_only"]),
                         str(p["neither"]), f"{agree:.1%}"])
            for e in p["examples"]:
                tail = e["response"][-120:].replace("\n", " ").replace("`", "'")
                examples.append(f"- {names[where]}, {grader}{', ' + e['kind'] if 'kind' in e else ''}: gold "
                                f"`{', '.join(e['golds'])[:80]}`; ours {'correct' if e['ours'] else 'wrong'}, "
                                f"{grader} {'correct' if e['theirs'] else 'wrong'}: `...{tail}`")
    parts = [
        "Every response graded by ours (math_verify) and by each paper's own grader (rlvr.grading; "
        f"`verifier.grader` picks one for training and evaluation). On this run's samples every grader reads the "
        f"span after `prompt.answer_after` ({agreement.get('answer_after') or 'none: the whole response'}); the "
        "synthetic endings are R1-style, read after `</think>`, but by siren_official whole, as its official "
        "code does.",
        markdown(["samples", "official grader", "correct: ours / theirs", "both correct", "ours only",
                  "theirs only", "neither", "agree"], rows)]
    kinds = agreement.get("synthetic", {}).get("by_kind")
    if kinds:
        graders = ["math_verify", *agreement["synthetic"]["pairs"]]
        parts.append("Synthetic endings by kind, correct verdicts per grader (every kind states the gold; "
                     "in gold_only_in_thinking the final box is wrong, so a correct verdict there is a false "
                     "positive):\n\n" + markdown(["kind", "n", *graders],
                                                 [[k, str(v["n"]), *[str(v[g]) for g in graders]]
                                                  for k, v in kinds.items()]))
    if examples:
        parts.append("Where they differ (up to three per grader and set):\n\n" + "\n".join(examples))
    return "\n\n".join(parts)
