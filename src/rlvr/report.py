"""The report: paper-style tables and training-dynamics figures from stage outputs.

Inputs: reports/eval/<run>/{metrics.json,samples.jsonl}, runs/<method>/steps.csv,
and the published numbers (data/vendor/paper_results.yaml). Outputs:
reports/results.md, reports/index.html (figures inlined), reports/figures/*.png.
"""

from __future__ import annotations

import base64
import csv
import json
from collections import defaultdict
from pathlib import Path

import yaml

PAPER_NAMES = {"base": "base"}  # our run name -> paper row name, where they differ


# ---- loading ----------------------------------------------------------------


def load_eval(eval_dir: Path, runs: list[str]) -> dict[str, dict]:
    out = {}
    for run in runs:
        path = eval_dir / run / "metrics.json"
        if path.exists():
            out[run] = json.loads(path.read_text())
    return out


def load_steps(runs_dir: Path, methods: list[str]) -> dict[str, list[dict]]:
    out = {}
    for m in methods:
        path = runs_dir / m / "steps.csv"
        if path.exists():
            with open(path, newline="") as f:
                out[m] = [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]
    return out


def per_question_accuracy(samples_path: Path) -> dict[tuple[str, str], float]:
    """(benchmark, id) -> share of the k samples that were correct."""
    hits = defaultdict(list)
    if samples_path.exists():
        for line in samples_path.read_text().splitlines():
            r = json.loads(line)
            hits[(r["benchmark"], r["id"])].append(bool(r["correct"]))
    return {k: sum(v) / len(v) for k, v in hits.items()}


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


# ---- tables -----------------------------------------------------------------


def metric_key(evals: dict[str, dict], kind: str) -> str:
    k = next(iter(evals.values()))["k"]
    return {"avg": f"avg@{k}", "pass": f"pass@{k}", "maj": f"maj@{k}"}[kind]


def table(evals: dict[str, dict], key: str) -> tuple[list[str], list[list]]:
    """Rows: run x (each benchmark, mean) of metric `key`."""
    benches = list(next(iter(evals.values()))["benchmarks"])
    header = ["method", *benches, "mean"]
    rows = [[run, *[m["benchmarks"].get(b, {}).get(key) for b in benches], m["mean"].get(key)]
            for run, m in evals.items()]
    return header, rows


def gains(rows: list[list], reference: str) -> list[list] | None:
    ref = next((r for r in rows if r[0] == reference), None)
    if ref is None:
        return None
    return [[r[0], *[(a - b) if a is not None and b is not None else None for a, b in zip(r[1:], ref[1:])]]
            for r in rows if r[0] not in (reference, "base")]


def paper_rows(paper: dict, profile: str | None, header: list[str]) -> list[list]:
    """Published rows for the matching recipe, in our column order."""
    if not profile or profile not in paper:
        return []
    cols = {"mean": "avg"}
    return [[f"{r['method']} (paper, {r.get('mrl', '')})", *[r.get(cols.get(c, c)) for c in header[1:]]]
            for r in paper[profile]["rows"]]


def markdown(header: list[str], rows: list[list], best: bool = True, signed: bool = False) -> str:
    best_at = {}
    if best:
        for j in range(1, len(header)):
            vals = [r[j] for r in rows if r[j] is not None and "(paper" not in str(r[0])]
            if vals:
                best_at[j] = max(vals)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [str(r[0])]
        for j, v in enumerate(r[1:], start=1):
            if v is None:
                cells.append("–")
                continue
            text = f"{v:+.3f}" if signed else f"{v:.3f}"
            cells.append(f"**{text}**" if best and best_at.get(j) == v and "(paper" not in str(r[0]) else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def level_table(evals: dict[str, dict], key: str, bench: str = "arithmetic") -> tuple[list[str], list[list]] | None:
    levels = sorted({lv for m in evals.values() for lv in m["benchmarks"].get(bench, {}).get("levels", {})}, key=int)
    if not levels:
        return None
    header = ["method", *[f"L{lv}" for lv in levels]]
    rows = [[run, *[m["benchmarks"][bench]["levels"].get(lv, {}).get(key) for lv in levels]]
            for run, m in evals.items() if bench in m["benchmarks"]]
    return header, rows


# ---- figures ----------------------------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curve_figure(steps: dict[str, list[dict]], keys: list[tuple[str, str]], path: Path, title: str) -> Path | None:
    if not steps:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 3.8), squeeze=False)
    for ax, (key, label) in zip(axes[0], keys):
        for method, rows in steps.items():
            xs = [r["step"] for r in rows if isinstance(r.get(key), float)]
            ys = [r[key] for r in rows if isinstance(r.get(key), float)]
            if xs:
                ax.plot(xs, ys, marker="o", ms=3, label=method)
        ax.set_xlabel("training step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def difficulty_figure(acc: dict[str, dict], evals: dict[str, dict], avg_key: str, path: Path) -> Path | None:
    """Left: per-question accuracy distribution per run (shares at 0% and 100%
    marked). Right: accuracy gain over base per arithmetic level per method."""
    if "base" not in acc or len(acc) < 2:
        return None
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    runs = list(acc)
    bins = sorted({round(v, 4) for a in acc.values() for v in a.values()})
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        vals = list(acc[run].values())
        shares = [sum(1 for v in vals if round(v, 4) == b) / len(vals) for b in bins]
        ax1.bar([j + i * width for j in range(len(bins))], shares, width, label=run)
    ax1.set_xticks([j + 0.4 - width / 2 for j in range(len(bins))], [f"{b:.0%}" for b in bins])
    ax1.set_xlabel("per-question accuracy (k samples)")
    ax1.set_ylabel("share of questions")
    ax1.set_title("difficulty bias: questions at 0% and 100% give no group signal")
    ax1.legend(fontsize=8)
    lt = level_table(evals, avg_key)
    if lt:
        header, rows = lt
        base = next(r for r in rows if r[0] == "base")
        methods = [r for r in rows if r[0] != "base"]
        w = 0.8 / max(len(methods), 1)
        for i, r in enumerate(methods):
            ax2.bar([j + i * w for j in range(len(header) - 1)],
                    [(a or 0) - (b or 0) for a, b in zip(r[1:], base[1:])], w, label=r[0])
        ax2.set_xticks([j + 0.4 - w / 2 for j in range(len(header) - 1)], header[1:])
        ax2.axhline(0, color="black", lw=0.8)
        ax2.set_xlabel("arithmetic difficulty level")
        ax2.set_ylabel(f"{avg_key} gain over base")
        ax2.set_title("accuracy gain per difficulty level")
        ax2.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- the whole report -------------------------------------------------------------


def zero_hundred(acc: dict[tuple, float]) -> tuple[float, float]:
    vals = list(acc.values())
    return (sum(v == 0 for v in vals) / len(vals), sum(v == 1 for v in vals) / len(vals)) if vals else (0.0, 0.0)


def build_report(runs: list[str], methods: list[str], eval_dir: Path, runs_dir: Path, out_dir: Path,
                 paper_path: Path | None = None, profile: str | None = None) -> dict:
    evals = load_eval(eval_dir, runs)
    if not evals:
        raise FileNotFoundError(f"no metrics.json under {eval_dir} for runs {runs}: run the evaluate stages first")
    steps = load_steps(runs_dir, methods)
    paper = yaml.safe_load(paper_path.read_text()) if paper_path and paper_path.exists() else {}
    fig_dir = out_dir / "figures"
    avg, pas, maj = (metric_key(evals, k) for k in ("avg", "pass", "maj"))
    sections, tables = [], {}
    for title, key in ((f"Main table: {avg} (pass@1 averaged over k samples)", avg), (pas, pas), (maj, maj)):
        header, rows = table(evals, key)
        tables[key] = {"header": header, "rows": rows}
        shown = rows + (paper_rows(paper, profile, header) if key == avg else [])
        sections.append(f"## {title}\n\n{markdown(header, shown)}")
        for ref in ("base", "grpo"):
            g = gains(rows, ref)
            if g and len(g) > 0:
                sections.append(f"### {key}: gain over {ref}\n\n{markdown(header, g, best=False, signed=True)}")
    lt = level_table(evals, avg)
    if lt:
        sections.append(f"## {avg} per arithmetic difficulty level\n\n{markdown(*lt)}")
    acc = {run: per_question_accuracy(eval_dir / run / "samples.jsonl") for run in evals}
    acc = {r: a for r, a in acc.items() if a}
    if acc:
        lines = ["| run | questions at 0% | questions at 100% |", "|---|---|---|"]
        lines += [f"| {r} | {zero_hundred(a)[0]:.1%} | {zero_hundred(a)[1]:.1%} |" for r, a in acc.items()]
        sections.append("## Difficulty bias: share of questions no sample solves / every sample solves\n\n"
                        + "\n".join(lines))
    figures = [f for f in (
        curve_figure(steps, [("reward_mean", "training reward"), ("entropy", "generation entropy (full vocab)")],
                     fig_dir / "training_dynamics.png", "training reward and entropy"),
        curve_figure(steps, [("kl", "KL(pi_old || pi)"), ("response_length", "response length (tokens)")],
                     fig_dir / "kl_length.png", "KL and response length"),
        curve_figure(steps, [("topp_entropy", "top-p entropy (SIREN)"), ("zero_variance_groups",
                                                                          "share of zero-variance groups")],
                     fig_dir / "entropy_groups.png", "top-p entropy and uninformative groups"),
        difficulty_figure(acc, evals, avg, fig_dir / "difficulty_bias.png"),
    ) if f is not None]
    md = "# Results\n\n" + "\n\n".join(sections)
    md += "\n\n## Figures\n\n" + "\n".join(f"![{f.stem}](figures/{f.name})" for f in figures) + "\n"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.md").write_text(md)
    (out_dir / "index.html").write_text(_html(md, figures))
    return {"tables": tables, "figures": [str(f) for f in figures], "runs": list(evals)}


def _html(md: str, figures: list[Path]) -> str:
    """A self-contained page: the markdown tables as HTML, figures inlined."""
    body = []
    table_rows: list[str] = []

    def flush():
        if table_rows:
            cells = [r.strip("|").split("|") for r in table_rows if not set(r) <= set("|-")]
            html = "<table>" + "".join(
                "<tr>" + "".join(f"<{'th' if i == 0 else 'td'}>{_inline(c.strip())}</{'th' if i == 0 else 'td'}>"
                                 for c in row) + "</tr>" for i, row in enumerate(cells)) + "</table>"
            body.append(html)
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
        elif line.strip():
            body.append(f"<p>{line}</p>")
    flush()
    for f in figures:
        data = base64.b64encode(Path(f).read_bytes()).decode()
        body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{f.stem}"><figcaption>{f.stem}'
                    "</figcaption></figure>")
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table{border-collapse:collapse;"
             "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}img{max-width:100%}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>rlvr results</title><style>{style}</style>" \
           f"</head><body>{''.join(body)}</body></html>\n"


def _inline(text: str) -> str:
    return f"<b>{text[2:-2]}</b>" if text.startswith("**") and text.endswith("**") else text
