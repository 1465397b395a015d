"""The whole report: a list of sections, a list of figures, and the
machine-readable outputs, written from the loaded results."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlvr.atomic import write_json, write_text
from rlvr.report import tables
from rlvr.report.audit import audit, audit_section, flag_note
from rlvr.report.checkpoints import checkpoint_section
from rlvr.report.claims import all_claim_rows, claimed_papers, claims_summary, claims_table
from rlvr.report.data_sets import data_section, sets_of
from rlvr.report.figure_set import figure_md, figures
from rlvr.report.figures import scores_figure
from rlvr.report.format import csv_cell, html, slug
from rlvr.report.inputs import KINDS, MethodResults, load_results
from rlvr.report.published import check_profile, paper_notes, paper_rows
from rlvr.report.scale import RunScale, scale_section
from rlvr.report.seeds import seeds_lead, seeds_section
from rlvr.report.signal import signal_section
from rlvr.runs import BASE, COLOR_NAMES, Run, method_colors


@dataclass
class Report:
    """What the sections read, and what they leave for the outputs after them."""

    results: dict[str, MethodResults]
    paper: dict
    profile: str | None
    objectives: dict[str, str]  # method -> objective
    fig_dir: Path = Path("figures")
    tables: dict = field(default_factory=dict)  # kind -> the scores table (headline.json)
    levels: tuple | None = None  # the arithmetic level section (the difficulty figure)
    lead_figures: list = field(default_factory=list)  # figures shown in the summary, not again at the end
    agreement: dict | None = None  # the grader_agreement stage's counts (the appendix)
    ablations: dict = field(default_factory=dict)  # variant -> the full method it ablates (report.ablations)
    scale: RunScale | None = None  # what the runs trained (the claims' verdicts name it); None: the papers'
    _score_tables: dict = field(default_factory=dict)

    @property
    def audit(self) -> dict:
        """The reward-hack audit of every method's rewarded samples (rlvr.report.audit)."""
        return audit({n: [s for seed in m.samples for s in seed] for n, m in self.results.items()})

    def score_table(self, kind: str) -> tuple[list[str], dict]:
        """sections.score_table, computed once per kind (the summary and the scores section share it)."""
        if kind not in self._score_tables:
            self._score_tables[kind] = tables.score_table(self.results, kind)
        return self._score_tables[kind]

    @property
    def k(self):
        return next(iter(self.results.values())).k

    @property
    def colors(self) -> dict[str, str]:
        """Each method's colour in every figure (and in dvc plots, which show these figures)."""
        return method_colors(list(self.results))

    @property
    def steps(self) -> dict[str, list[dict]]:
        """Every trained run's steps, by run label."""
        return {(n if len(m.seeds) == 1 else f"{n}/seed{s}"): rows for n, m in self.results.items()
                for s, rows in zip(m.seeds, m.steps) if rows}


    def claim_rows(self) -> list[list[str]]:
        return all_claim_rows(self.results, self.objectives, self.k, self.paper.get(self.profile) or {},
                              variants=self.ablations, scale=self.scale)


# ---- sections: each returns its markdown sections (none when it has nothing to show) ----


def summary(r: Report) -> list[str]:
    """The answer first: each claim's verdict, the sets that say nothing at
    this scale, and the main table as a figure with its intervals."""
    parts = [verdict(r)]
    hack = flag_note(r.audit)
    if hack:
        parts.append(hack)
    rows = r.claim_rows()
    if rows:
        parts.append("The papers' claims on this run's data (the table below has the statistics):\n\n"
                     + claims_summary(rows))
    note = tables.uninformative_note(r.results)
    if note:
        parts.append(note)
    columns, cells = r.score_table("avg")
    figure = scores_figure(cells, columns, f"avg@{r.k}", r.fig_dir / "scores.png", r.colors)
    if figure is not None:
        r.lead_figures.append(figure)
        parts.append(figure_md(figure))
    return ["## Summary\n\n" + "\n\n".join(parts)] if parts else []


def verdict(r: Report) -> str:
    """The summary's first sentence, as strong as its evidence: a best method is
    named only where its lead over the runner-up holds over problems and over
    the spread between seeds; with one seed the sentence says what one seed
    can say; otherwise that the top two cannot be told apart."""
    columns, rows = r.score_table("avg")
    sets = ", ".join(next(iter(r.results.values())).mean_sets or [])
    ranked = sorted(rows, key=lambda n: rows[n][-1][0], reverse=True)
    if len(ranked) < 2:
        return f"One model evaluated: {ranked[0]}, mean avg@{r.k} {rows[ranked[0]][-1][0]:.3f} over {sets}."
    first, second = ranked[:2]
    top = f"{first} ({rows[first][-1][0]:.3f}) and {second} ({rows[second][-1][0]:.3f})"
    d, lo, hi = tables.paired(r.results[first], r.results[second], "avg", None, r.results[first].mean_sets)
    if lo <= 0:
        return (f"**No method is distinguishable here**: on mean avg@{r.k} over the sets ({sets}) "
                f"the top two, {top}, differ by less than their paired 95% interval.")
    lead = f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}] over the runner-up {second}, paired over problems"
    over_seeds = seeds_lead(r.results[first], r.results[second], "avg")
    if over_seeds is None:
        return (f"**{first} scores highest here, on one seed**: mean avg@{r.k} over the sets ({sets}) "
                f"{rows[first][-1][0]:.3f}, {lead}. One seed cannot name a best method: that interval covers the "
                "choice of problems, not the randomness of training, and seeds of one method can differ by more "
                "(`dvc exp run -S 'seeds=[0,1,2]'` measures it).")
    sd, slo, shi = over_seeds
    seeds = f"over the seeds' means {sd:+.3f} [{slo:+.3f}, {shi:+.3f}]"
    if slo > 0:
        return (f"**{first} is the best method here**: highest mean avg@{r.k} over the sets ({sets}), {lead}, "
                f"and {seeds}.")
    return (f"**{first} scores highest here, within the spread between seeds**: mean avg@{r.k} over the sets "
            f"({sets}), {lead}, but {seeds}: other seeds could reorder them.")


def how_to_read(r: Report) -> list[str]:
    lost = {name: n for m in r.results.values() for x in m.metrics for name, n in x.get("skipped_rows", {}).items()}
    note = ("\n\nRows lost in the data stage (data.skip_bad_rows: unreadable rows skipped, so these sets are "
            "smaller than published): " + ", ".join(f"{name} {n}" for name, n in sorted(lost.items()))) if lost else ""
    colors = ", ".join(f"{name} {COLOR_NAMES[c]}" for name, c in r.colors.items())
    legend = (f"\n\nEach method keeps one colour in every figure: {colors}. MLflow colours runs its own way, per "
              "browser (a run's colour swatch in its runs table changes it), so match runs there by name.")
    return [f"## How to read the numbers\n\n{tables.intro(r.results)}{note}{legend}"]


def data(r: Report) -> list[str]:
    sets = sets_of(r.results)
    return [data_section(sets)] if sets else []


def scores(r: Report) -> list[str]:
    out = []
    for kind in KINDS:
        cols = next(iter(r.results.values())).benchmarks + ["mean"]
        shown = paper_rows(r.paper, r.profile, cols) if kind == "avg" else []
        md, r.tables[kind] = tables.scores_section(r.results, kind, shown, r.score_table(kind))
        title = {"avg": f"Main table: avg@{r.k} (pass@1 averaged over k samples)", "pass": f"pass@{r.k}",
                 "maj": f"maj@{r.k}"}[kind]
        out.append(f"## {title}\n\n{md}")
        for ref in (BASE, "grpo"):
            g = tables.gains_section(r.results, kind, ref)
            if g:
                out.append(f"### {kind}@{r.k}: paired difference against {ref}\n\n{g}")
    return out


def reward_audit(r: Report) -> list[str]:
    md = audit_section(r.audit)
    return [f"## Reward-hack audit: what the rewarded answers are\n\n{md}"] if md else []


def published(r: Report) -> list[str]:
    notes = paper_notes(r.paper, r.profile, list(r.results))
    return [f"## Published numbers ({r.profile})\n\n{notes}"] if notes else []


def ablations(r: Report) -> list[str]:
    entry = r.paper.get(r.profile) or {}
    md = tables.ablation_section(r.results, r.ablations, r.k, entry.get("ablations"))
    order = tables.ablation_order(r.results, r.ablations, entry.get("ablation_order"), r.k)
    if md and order:
        md += "\n\nThe paper's ordering of its ablations:\n\n" + order
    return [f"## Ablations: each variant against its full method (paired over problems)\n\n{md}"] if md else []


def diversity(r: Report) -> list[str]:
    md = tables.diversity_section(r.results, r.k)
    return [f"## Diversity: distinct answers and perplexity (mean per problem, 95% intervals)\n\n{md}"] if md else []


def seeds(r: Report) -> list[str]:
    md = seeds_section(r.results, "avg")
    return [f"## Seeds: avg@{r.k} of each seed, and the spread between seeds\n\n{md}"] if md else []


def training_signal(r: Report) -> list[str]:
    md = signal_section(r.results)
    return [f"## What each training learned from: signal, truncation, length, constraint\n\n{md}"] if md else []


def levels(r: Report) -> list[str]:
    r.levels = tables.level_section(r.results, r.k)
    return [f"## avg@{r.k} per arithmetic difficulty level (mean over seeds)\n\n{r.levels[0]}"] if r.levels else []


def difficulty(r: Report) -> list[str]:
    return ["## Difficulty bias: share of questions no sample solves / every sample solves "
            f"(Wilson 95% intervals)\n\n{tables.difficulty_section(r.results)}"]


def checkpoints(r: Report) -> list[str]:
    md = checkpoint_section(r.results, r.k)
    return [md] if md else []


def graders(r: Report) -> list[str]:
    md = tables.agreement_section(r.agreement) if r.agreement else ""
    return [f"## Appendix: the graders compared\n\n{md}"] if md else []


def claims(r: Report) -> list[str]:
    rows = r.claim_rows()
    md = claims_table(rows)
    if not md:
        return []
    lead = f"{scale_section(r.scale, claimed_papers(rows))}\n\n" if r.scale else ""
    return [f"## The papers' claims, checked on this run's data\n\n{lead}{md}"]


LEAD = (summary, claims)  # the answer, before the contents
SECTIONS = (how_to_read, data, scores, reward_audit, published, ablations, seeds, training_signal, levels, difficulty, diversity, checkpoints, graders)  # the detail, in order
AGREEMENT = "grader_agreement.json"  # the grader_agreement stage's output, beside the report


def contents(parts: list[str]) -> str:
    """Links to the detail sections (GitHub's heading anchors; index.html gives its headings the same ids)."""
    titles = [p.splitlines()[0].lstrip("#").strip() for p in parts if p.startswith("## ")]
    return "## Contents\n\n" + "\n".join(f"- [{t}](#{slug(t)})" for t in titles + ["Figures"])


# ---- the outputs ---------------------------------------------------------------


def build_report(runs: list[Run], root: Path, out_dir: Path, paper_path: Path | None = None,
                 profile: str | None = None, objectives: dict[str, str] | None = None,
                 ablations: dict[str, str] | None = None, scale: RunScale | None = None) -> dict:
    """Write every output; `objectives` maps method -> objective (for the claims),
    `ablations` an ablated variant -> its full method (the ablation table)."""
    paper = yaml.safe_load(paper_path.read_text()) if paper_path and paper_path.exists() else {}
    check_profile(paper, profile)
    results = load_results(root, runs)
    if not results:
        raise FileNotFoundError(f"no metrics.json under {root / 'reports/eval'} for runs "
                                f"{[r.name for r in runs]}: run the evaluate stages first")
    for m in results.values():
        m.mean_sets = tables.mean_sets(results)
    agreement = json.loads((out_dir / AGREEMENT).read_text()) if (out_dir / AGREEMENT).exists() else None
    report = Report(results, paper, profile, objectives or {}, fig_dir=out_dir / "figures", agreement=agreement,
                    ablations=ablations or {}, scale=scale)
    lead = [md for section in LEAD for md in section(report)]
    detail = [md for section in SECTIONS for md in section(report)]
    made = figures(report)
    md = "# Results\n\n" + "\n\n".join([*lead, contents(detail), *detail])
    md += "\n\n## Figures\n\n" + "\n\n".join(figure_md(f) for f in made) + "\n"
    write_text(out_dir / "results.md", md)
    write_text(out_dir / "index.html", html(md, out_dir))
    write_curves(results, out_dir / "curves.csv")
    write_json(out_dir / "headline.json", headline(results, report.tables))
    return {"tables": report.tables, "figures": [str(f) for f in [*report.lead_figures, *made]],
            "methods": list(results)}


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
