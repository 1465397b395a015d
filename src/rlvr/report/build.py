"""The whole report: a list of sections, a list of figures, and the
machine-readable outputs, written from the loaded results."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlvr.atomic import write_json, write_text
from rlvr.report import sections as tables
from rlvr.report.claims import claims_table
from rlvr.report.figures import curve_figure, difficulty_figure
from rlvr.report.format import csv_cell, html
from rlvr.report.load import KINDS, MethodResults, load_results
from rlvr.runs import BASE, Run


@dataclass
class Report:
    """What the sections read, and what they leave for the outputs after them."""

    results: dict[str, MethodResults]
    paper: dict
    profile: str | None
    objectives: dict[str, str]  # method -> objective
    tables: dict = field(default_factory=dict)  # kind -> the scores table (headline.json)
    levels: tuple | None = None  # the arithmetic level section (the difficulty figure)

    @property
    def k(self):
        return next(iter(self.results.values())).k

    @property
    def steps(self) -> dict[str, list[dict]]:
        """Every trained run's steps, by run label."""
        return {(n if len(m.seeds) == 1 else f"{n}/seed{s}"): rows for n, m in self.results.items()
                for s, rows in zip(m.seeds, m.steps) if rows}


# ---- sections: each returns its markdown sections (none when it has nothing to show) ----


def scores(r: Report) -> list[str]:
    out = []
    for kind in KINDS:
        cols = next(iter(r.results.values())).benchmarks + ["mean"]
        shown = tables.paper_rows(r.paper, r.profile, cols) if kind == "avg" else []
        md, r.tables[kind] = tables.scores_section(r.results, kind, shown)
        title = {"avg": f"Main table: avg@{r.k} (pass@1 averaged over k samples)", "pass": f"pass@{r.k}",
                 "maj": f"maj@{r.k}"}[kind]
        out.append(f"## {title}\n\n{md}")
        for ref in (BASE, "grpo"):
            g = tables.gains_section(r.results, kind, ref)
            if g:
                out.append(f"### {kind}@{r.k}: paired difference against {ref}\n\n{g}")
    return out


def published(r: Report) -> list[str]:
    notes = tables.paper_notes(r.paper, r.profile)
    return [f"## Published numbers ({r.profile})\n\n{notes}"] if notes else []


def seeds(r: Report) -> list[str]:
    md = tables.seeds_section(r.results, "avg")
    return [f"## Seeds: avg@{r.k} of each seed, and the spread between seeds\n\n{md}"] if md else []


def levels(r: Report) -> list[str]:
    r.levels = tables.level_section(r.results, r.k)
    return [f"## avg@{r.k} per arithmetic difficulty level (mean over seeds)\n\n{r.levels[0]}"] if r.levels else []


def difficulty(r: Report) -> list[str]:
    return ["## Difficulty bias: share of questions no sample solves / every sample solves "
            f"(Wilson 95% intervals)\n\n{tables.difficulty_section(r.results)}"]


def checkpoints(r: Report) -> list[str]:
    md = tables.checkpoint_section(r.results, r.k)
    return [f"## Checkpoint selection: the final model and the best on validation\n\n{md}"] if md else []


def claims(r: Report) -> list[str]:
    md = claims_table(r.results, r.objectives, r.k)
    return [f"## The papers' claims, checked on this run's data\n\n{md}"] if md else []


SECTIONS = (scores, published, seeds, levels, difficulty, checkpoints, claims)

# Curves of steps.csv columns: (column, label) pairs per figure, its file and title.
CURVES = (
    ((("reward_mean", "training reward"), ("entropy", "generation entropy (full vocab)")),
     "training_dynamics.png", "training reward and entropy"),
    ((("kl", "KL(pi_old || pi)"), ("response_length", "response length (tokens)")),
     "kl_length.png", "KL and response length"),
    ((("topp_entropy", "top-p entropy (SIREN)"), ("zero_variance_groups", "share of zero-variance groups")),
     "entropy_groups.png", "top-p entropy and uninformative groups"),
    ((("kl_active", "share of loss calls with the KL penalty active"), ("clip_frac", "share of clipped tokens")),
     "constraint.png", "trust region: DisCO's constraint and the clip"),
)
VALIDATION_CURVE = ((("val_avg@k", "validation avg@k"), ("val_maj@k", "validation maj@k")),
                    "validation.png", "validation during training (problems held out of training)")


def figures(r: Report, fig_dir: Path) -> list[Path]:
    steps = r.steps
    made = [curve_figure(steps, list(series), fig_dir / name, title) for series, name, title in CURVES]
    made.append(difficulty_figure({n: m.accuracy_by_question() for n, m in r.results.items()},
                                  r.levels[1] if r.levels else {}, f"avg@{r.k}", fig_dir / "difficulty_bias.png"))
    series, name, title = VALIDATION_CURVE
    made.append(curve_figure(steps, list(series), fig_dir / name, title))
    return [f for f in made if f is not None]


# ---- the outputs ---------------------------------------------------------------


def build_report(runs: list[Run], root: Path, out_dir: Path, paper_path: Path | None = None,
                 profile: str | None = None, objectives: dict[str, str] | None = None) -> dict:
    """Write every output; `objectives` maps method -> objective (for the claims)."""
    results = load_results(root, runs)
    if not results:
        raise FileNotFoundError(f"no metrics.json under {root / 'reports/eval'} for runs "
                                f"{[r.name for r in runs]}: run the evaluate stages first")
    paper = yaml.safe_load(paper_path.read_text()) if paper_path and paper_path.exists() else {}
    report = Report(results, paper, profile, objectives or {})
    parts = [tables.intro(results)] + [md for section in SECTIONS for md in section(report)]
    made = figures(report, out_dir / "figures")
    md = "# Results\n\n" + "\n\n".join(parts)
    md += "\n\n## Figures\n\n" + "\n".join(f"![{f.stem}](figures/{f.name})" for f in made) + "\n"
    write_text(out_dir / "results.md", md)
    write_text(out_dir / "index.html", html(md, made))
    write_curves(results, out_dir / "curves.csv")
    write_json(out_dir / "headline.json", headline(results, report.tables))
    return {"tables": report.tables, "figures": [str(f) for f in made], "methods": list(results)}


def write_curves(results, path: Path) -> None:
    """Every trained run's steps in one long table (step, run, metrics), for `dvc plots`."""
    rows = [{"step": int(r["step"]), "run": name if len(m.seeds) == 1 else f"{name}/seed{seed}", **r}
            for name, m in results.items() for seed, steps in zip(m.seeds, m.steps) for r in steps]
    fields = ["step", "run", *sorted({k for r in rows for k in r} - {"step", "run"})]
    text = ",".join(fields) + "\n" + "".join(
        ",".join(csv_cell(r.get(f)) for f in fields) + "\n" for r in rows)
    write_text(path, text)


def headline(results, tables: dict) -> dict:
    """Mean avg@k and maj@k per method: the columns `dvc exp show` leads with."""
    out = {}
    for kind in ("avg", "maj"):
        t = tables[kind]
        out[f"{kind}@{next(iter(results.values())).k}"] = {n: round(cells[-1][0], 4) for n, cells in t["rows"].items()}
    return out
