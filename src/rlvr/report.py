"""The report: paper-style tables with intervals, the paper-claims verdicts,
and the training-dynamics figures, from the stage outputs.

Inputs, per run (rlvr.runs): reports/eval/<run>/{metrics.json, problems.jsonl,
by_step.json} and reports/train/<run>/steps.csv, plus the published numbers.
Outputs: reports/results.md, reports/index.html (figures inlined),
reports/figures/*.png, reports/curves.csv (every run's steps, for `dvc plots`)
and reports/headline.json (the mean scores per method, for `dvc exp show`).
Every number of ours carries a 95% bootstrap interval over problems; words
such as "better" appear only where an interval allows them (rlvr.stats).
"""

from __future__ import annotations

import base64
import csv
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from rlvr import stats
from rlvr.atomic import write_json, write_text
from rlvr.claims import claims_table
from rlvr.figures import curve_figure, difficulty_figure
from rlvr.runs import BASE, Run

KINDS = ("avg", "pass", "maj")


@dataclass
class MethodResults:
    """Every evaluated seed of one method (the base model: one 'seed')."""

    name: str
    metrics: list[dict] = field(default_factory=list)  # metrics.json per seed
    problems: list[list[dict]] = field(default_factory=list)  # problems.jsonl per seed
    steps: list[list[dict]] = field(default_factory=list)  # steps.csv per seed
    by_step: list[dict] = field(default_factory=list)  # by_step.json "steps" per seed
    seeds: list[int | None] = field(default_factory=list)

    @property
    def k(self) -> int | str:
        """Samples per problem, or "k" when the sets were sampled with different k."""
        per_set = set((self.metrics[0].get("k_per_set") or {}).values())
        return "k" if len(per_set) > 1 else self.metrics[0]["k"]

    @property
    def benchmarks(self) -> list[str]:
        return list(self.metrics[0]["benchmarks"])

    def values(self, kind: str) -> dict[str, np.ndarray]:
        """Per benchmark: each problem's value, averaged over seeds (aligned by problem)."""
        per_seed = [per_problem(rows, kind) for rows in self.problems]
        return {b: np.mean([s[b] for s in per_seed], axis=0) for b in per_seed[0]}

    def accuracy_by_question(self) -> list[float]:
        return [float(v) for arr in self.values("avg").values() for v in arr]


def per_problem(rows: list[dict], kind: str) -> dict[str, np.ndarray]:
    """avg: share of the k samples correct; pass: pass@k (any correct); maj: maj@k."""
    out = defaultdict(list)
    for r in rows:
        value = {"avg": r["correct"] / r["k"], "pass": float(r["correct"] > 0), "maj": float(r["majority"])}[kind]
        out[r["benchmark"]].append(value)
    return {b: np.asarray(v) for b, v in out.items()}


def _read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def load_results(root: Path, runs: list[Run]) -> dict[str, MethodResults]:
    """Evaluated runs grouped by method, in the order of `runs`."""
    out: dict[str, MethodResults] = {}
    for run in runs:
        metrics_file = root / run.eval_dir / "metrics.json"
        if not metrics_file.exists():
            continue
        m = out.setdefault(run.method, MethodResults(run.method))
        m.metrics.append(json.loads(metrics_file.read_text()))
        m.problems.append(_read_jsonl(root / run.eval_dir / "problems.jsonl"))
        m.steps.append(_read_csv(root / run.train_dir / "steps.csv"))
        by_step = root / run.eval_dir / "by_step.json"
        m.by_step.append(json.loads(by_step.read_text())["steps"] if by_step.exists() else {})
        m.seeds.append(run.seed)
    return out


# ---- tables -----------------------------------------------------------------


Cell = tuple[float, float, float]  # estimate, low, high


def score_table(results: dict[str, MethodResults], kind: str) -> tuple[list[str], dict[str, list[Cell]]]:
    """Per method: (estimate, 95% interval) for each benchmark, then the mean over them."""
    benches = next(iter(results.values())).benchmarks
    rows = {}
    for name, m in results.items():
        vals = m.values(kind)
        rows[name] = [stats.mean_ci([vals[b]]) for b in benches] + [stats.mean_ci([vals[b] for b in benches])]
    return benches + ["mean"], rows


def paired(a: MethodResults, b: MethodResults, kind: str, bench: str | None) -> Cell:
    """a - b on the same problems: one benchmark, or the mean over all (bench None)."""
    va, vb = a.values(kind), b.values(kind)
    keys = [bench] if bench else list(va)
    return stats.paired_diff_ci([va[k] for k in keys], [vb[k] for k in keys])


def best_marks(results: dict[str, MethodResults], kind: str, columns: list[str]) -> dict[str, str]:
    """Column -> the method that is best there with its interval over the
    runner-up excluding 0 (no mark where the top two cannot be told apart)."""
    marks = {}
    _, rows = score_table(results, kind)
    for j, col in enumerate(columns):
        ranked = sorted(rows, key=lambda n: rows[n][j][0], reverse=True)
        if len(ranked) < 2:
            continue
        _, lo, _ = paired(results[ranked[0]], results[ranked[1]], kind, None if col == "mean" else col)
        if lo > 0:
            marks[col] = ranked[0]
    return marks


def fmt(cell: Cell, signed: bool = False) -> str:
    est, lo, hi = cell
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(est)} [{f.format(lo)}, {f.format(hi)}]"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def scores_section(results, kind: str, paper_rows: list[list[str]]) -> tuple[str, dict]:
    cols, rows = score_table(results, kind)
    marks = best_marks(results, kind, cols)
    body = [[name, *[f"**{fmt(c)}**" if marks.get(col) == name else fmt(c) for col, c in zip(cols, cells)]]
            for name, cells in rows.items()]
    return markdown(["method", *cols], body + paper_rows), {"columns": cols, "rows": rows, "best": marks}


def gains_section(results, kind: str, reference: str) -> str | None:
    if reference not in results:
        return None
    others = [n for n in results if n not in (reference, BASE)]
    if not others:
        return None
    cols = results[reference].benchmarks + ["mean"]
    body = []
    for name in others:
        cells = [paired(results[name], results[reference], kind, None if c == "mean" else c) for c in cols]
        body.append([name, *[fmt(c, signed=True) for c in cells], stats.verdict(cells[-1][1], cells[-1][2])])
    return markdown(["method", *cols, "mean: verdict"], body)


def seeds_section(results, kind: str) -> str | None:
    """Each seed's mean score, and the spread between seeds."""
    trained = {n: m for n, m in results.items() if n != BASE and len(m.seeds) > 1}
    if not trained:
        return None
    body = []
    for name, m in trained.items():
        means = [float(np.mean([per_problem(p, kind)[b].mean() for b in m.benchmarks])) for p in m.problems]
        sd = float(np.std(means, ddof=1))
        body.append([name, ", ".join(f"s{s}: {v:.3f}" for s, v in zip(m.seeds, means)),
                     f"{np.mean(means):.3f}", f"{sd:.3f}", f"{np.ptp(means):.3f}"])
    return markdown(["method", f"mean {kind}@k per seed", "mean", "sd between seeds", "range"], body)


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


def selected_checkpoints(results, kind: str) -> list[list[str]]:
    """Per trained method: the final model and the best-on-validation snapshot,
    each scored on the test sets (mean over benchmarks, 95% interval over
    problems, per-problem values averaged over seeds)."""
    body = []
    for name, m in results.items():
        picks = [_final_and_best(bs) for bs in m.by_step
                 if any(e.get("validation") is not None for e in bs.values())]  # trained with validation
        if name == BASE or not picks:
            continue
        final = _snapshot_values([f for f, _ in picks], m, kind)
        best = _snapshot_values([b for _, b in picks], m, kind)
        val = [b.get("validation") for _, b in picks if b.get("validation") is not None]
        body.append([name, "/".join(f["step"] for f, _ in picks), fmt(stats.mean_ci(list(final.values()))),
                     "/".join(b["step"] for _, b in picks), f"{np.mean(val):.3f}" if val else "-",
                     fmt(stats.mean_ci(list(best.values())))])
    return body


def _final_and_best(by_step: dict) -> tuple[dict, dict]:
    """One seed's by_step.json entries (each with its "step"): the final model
    (the last step) and the best on validation (the final one if none is marked)."""
    entries = [dict(e, step=s) for s, e in sorted(by_step.items(), key=lambda kv: int(kv[0]))]
    return entries[-1], next((e for e in entries if e.get("best")), entries[-1])


def _snapshot_values(entries: list[dict], m: MethodResults, kind: str) -> dict[str, np.ndarray]:
    """Per-problem values of one checkpoint per seed, averaged over the seeds."""
    template = m.problems[0]
    per_seed = []
    for e in entries:
        rows = [dict(t, correct=c, majority=mj) for t, (c, mj) in zip(template, e["problems"])]
        per_seed.append(per_problem(rows, kind))
    return {b: np.mean([p[b] for p in per_seed], axis=0) for b in per_seed[0]}


def checkpoint_section(results, k: int) -> str | None:
    body = selected_checkpoints(results, "avg")
    if not body:
        return None
    return ("The best checkpoint is chosen on validation during training (problems held out of the training "
            "mixture, the light profile of `validation:`), never on the test sets; both are then scored with the "
            "full protocol. Steps are per seed.\n\n"
            + markdown(["method", "final step", f"final, test avg@{k}", "best step (validation)",
                        "validation avg@k", f"best, test avg@{k}"], body))


def paper_rows(paper: dict, profile: str | None, columns: list[str]) -> list[list[str]]:
    """Published rows for the matching recipe, in our column order."""
    if not profile or profile not in paper or "rows" not in paper[profile]:
        return []
    key = {"mean": "avg"}
    return [[f"{r['method']} (paper, {r.get('mrl', '')})",
             *[f"{r[key.get(c, c)]:.3f}" if r.get(key.get(c, c)) is not None else "–" for c in columns]]
            for r in paper[profile]["rows"]]


def paper_notes(paper: dict, profile: str | None) -> str | None:
    """What a profile without per-benchmark rows has (SIREN: headline figures only)."""
    entry = paper.get(profile) if profile else None
    if not entry or "rows" in entry:
        return None
    lines = [f"- {k}: {v}" for k, v in (entry.get("headline") or {}).items()]
    missing = entry.get("missing") or ["per-benchmark rows (not found in the paper or the official repository)"]
    return "Published figures for this recipe:\n" + "\n".join(lines) + "\n\nNot available: " + "; ".join(missing)


# ---- machine-readable outputs ------------------------------------------------------


def write_curves(results, path: Path) -> None:
    """Every trained run's steps in one long table (step, run, metrics), for `dvc plots`."""
    rows = [{"step": int(r["step"]), "run": name if len(m.seeds) == 1 else f"{name}/seed{seed}", **r}
            for name, m in results.items() for seed, steps in zip(m.seeds, m.steps) for r in steps]
    fields = ["step", "run", *sorted({k for r in rows for k in r} - {"step", "run"})]
    text = ",".join(fields) + "\n" + "".join(
        ",".join(_cell(r.get(f)) for f in fields) + "\n" for r in rows)
    write_text(path, text)


def _cell(v) -> str:
    if v is None:
        return ""
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def headline(results, tables: dict) -> dict:
    """Mean avg@k and maj@k per method: the columns `dvc exp show` leads with."""
    out = {}
    for kind in ("avg", "maj"):
        t = tables[kind]
        out[f"{kind}@{next(iter(results.values())).k}"] = {n: round(cells[-1][0], 4) for n, cells in t["rows"].items()}
    return out


# ---- the whole report -------------------------------------------------------------


def build_report(runs: list[Run], root: Path, out_dir: Path, paper_path: Path | None = None,
                 profile: str | None = None, objectives: dict[str, str] | None = None) -> dict:
    """Write every output; `objectives` maps method -> objective (for the claims)."""
    results = load_results(root, runs)
    if not results:
        raise FileNotFoundError(f"no metrics.json under {root / 'reports/eval'} for runs "
                                f"{[r.name for r in runs]}: run the evaluate stages first")
    paper = yaml.safe_load(paper_path.read_text()) if paper_path and paper_path.exists() else {}
    k = next(iter(results.values())).k
    sections, tables = [_intro(results)], {}
    for kind in KINDS:
        cols = next(iter(results.values())).benchmarks + ["mean"]
        shown = paper_rows(paper, profile, cols) if kind == "avg" else []
        md, tables[kind] = scores_section(results, kind, shown)
        title = {"avg": f"Main table: avg@{k} (pass@1 averaged over k samples)", "pass": f"pass@{k}",
                 "maj": f"maj@{k}"}[kind]
        sections.append(f"## {title}\n\n{md}")
        for ref in (BASE, "grpo"):
            g = gains_section(results, kind, ref)
            if g:
                sections.append(f"### {kind}@{k}: paired difference against {ref}\n\n{g}")
    notes = paper_notes(paper, profile)
    if notes:
        sections.append(f"## Published numbers ({profile})\n\n{notes}")
    seeds = seeds_section(results, "avg")
    if seeds:
        sections.append(f"## Seeds: avg@{k} of each seed, and the spread between seeds\n\n{seeds}")
    levels = level_section(results, k)
    if levels:
        sections.append(f"## avg@{k} per arithmetic difficulty level (mean over seeds)\n\n{levels[0]}")
    sections.append("## Difficulty bias: share of questions no sample solves / every sample solves "
                    f"(Wilson 95% intervals)\n\n{difficulty_section(results)}")
    chosen = checkpoint_section(results, k)
    if chosen:
        sections.append(f"## Checkpoint selection: the final model and the best on validation\n\n{chosen}")
    claims = claims_table(results, objectives or {}, k)
    if claims:
        sections.append(f"## The papers' claims, checked on this run's data\n\n{claims}")
    steps = {(n if len(m.seeds) == 1 else f"{n}/seed{s}"): rows for n, m in results.items()
             for s, rows in zip(m.seeds, m.steps) if rows}
    fig_dir = out_dir / "figures"
    figures = [f for f in (
        curve_figure(steps, [("reward_mean", "training reward"), ("entropy", "generation entropy (full vocab)")],
                     fig_dir / "training_dynamics.png", "training reward and entropy"),
        curve_figure(steps, [("kl", "KL(pi_old || pi)"), ("response_length", "response length (tokens)")],
                     fig_dir / "kl_length.png", "KL and response length"),
        curve_figure(steps, [("topp_entropy", "top-p entropy (SIREN)"), ("zero_variance_groups",
                                                                          "share of zero-variance groups")],
                     fig_dir / "entropy_groups.png", "top-p entropy and uninformative groups"),
        curve_figure(steps, [("kl_active", "share of loss calls with the KL penalty active"),
                             ("clip_frac", "share of clipped tokens")],
                     fig_dir / "constraint.png", "trust region: DisCO's constraint and the clip"),
        difficulty_figure({n: m.accuracy_by_question() for n, m in results.items()},
                          levels[1] if levels else {}, f"avg@{k}", fig_dir / "difficulty_bias.png"),
        curve_figure(steps, [("val_avg@k", "validation avg@k"), ("val_maj@k", "validation maj@k")],
                     fig_dir / "validation.png", "validation during training (problems held out of training)"),
    ) if f is not None]
    md = "# Results\n\n" + "\n\n".join(sections)
    md += "\n\n## Figures\n\n" + "\n".join(f"![{f.stem}](figures/{f.name})" for f in figures) + "\n"
    write_text(out_dir / "results.md", md)
    write_text(out_dir / "index.html", _html(md, figures))
    write_curves(results, out_dir / "curves.csv")
    write_json(out_dir / "headline.json", headline(results, tables))
    return {"tables": tables, "figures": [str(f) for f in figures], "methods": list(results)}


def _intro(results) -> str:
    m = next(iter(results.values()))
    sizes = ", ".join(f"{b}: {len(v)}" for b, v in m.values("avg").items())
    per_set = m.metrics[0].get("k_per_set") or {}
    k_text = f"k = {m.k}" if m.k != "k" else "k per set: " + ", ".join(f"{b} {v}" for b, v in per_set.items())
    seeds = {n: len(r.seeds) for n, r in results.items() if n != BASE}
    return (f"{k_text} samples per problem; problems per set: {sizes}; seeds per method: "
            f"{', '.join(f'{n} {s}' for n, s in seeds.items()) or 'none'}. Each score is followed by its 95% "
            "bootstrap interval over problems (the k samples of a problem resampled together; with several "
            "seeds, the seed-averaged problem). Bold marks a column's best only where its interval over the "
            "runner-up excludes 0. A difference whose interval contains 0 is not distinguishable at this scale."
            + (" With one seed per method, the intervals cover the choice of problems, not the randomness of "
               "training: a difference between two trained methods describes these runs, and seeds of one method "
               "can differ by more (`dvc exp run -S 'seeds=[0,1,2]'` measures it)."
               if any(s < 2 for s in seeds.values()) else ""))


def _html(md: str, figures: list[Path]) -> str:
    """A self-contained page: the markdown tables as HTML, figures inlined."""
    body, table_rows = [], []

    def flush():
        if table_rows:
            cells = [r.strip("|").split("|") for r in table_rows if not set(r) <= set("|-")]
            tag = lambda i: "th" if i == 0 else "td"  # noqa: E731
            body.append("<table>" + "".join(
                "<tr>" + "".join(f"<{tag(i)}>{_inline(c.strip())}</{tag(i)}>" for c in row) + "</tr>"
                for i, row in enumerate(cells)) + "</table>")
            table_rows.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            table_rows.append(line)
            continue
        flush()
        if line.startswith("!["):
            continue
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{line.lstrip('#').strip()}</h{level}>")
        elif line.startswith("- "):
            body.append(f"<li>{line[2:]}</li>")
        elif line.strip():
            body.append(f"<p>{line}</p>")
    flush()
    for f in figures:
        data = base64.b64encode(Path(f).read_bytes()).decode()
        body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{f.stem}"><figcaption>{f.stem}'
                    "</figcaption></figure>")
    style = ("body{font-family:sans-serif;max-width:1300px;margin:2em auto}table{border-collapse:collapse;"
             "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}img{max-width:100%}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>rlvr results</title><style>{style}</style>" \
           f"</head><body>{''.join(body)}</body></html>\n"


def _inline(text: str) -> str:
    return f"<b>{text[2:-2]}</b>" if text.startswith("**") and text.endswith("**") else text
