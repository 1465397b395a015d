"""Numbers in the README and docs that come from the code or from reports/,
written in place between markers, so prose never carries a number by hand:

    <!-- generated: memory_table -->
    ...
    <!-- end generated -->

`rlvr doc-blocks` rewrites every block from its source (after a
`dvc repro` changed reports/, or a recipe changed); tests/tools/test_doc_blocks.py
checks that each block is what its source gives now.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FILES = ["README.md", "docs/gpu.md", "docs/default.md", "docs/performance.md", "docs/recipes.md"]
# A block's content starts on the marker's next line; an inline one right after the marker.
BLOCK = re.compile(r"(<!-- generated: (\w+) -->(\n?))(.*?)(<!-- end generated -->)", re.S)


def markdown_table(text: str, heading: str) -> list[dict[str, str]]:
    """The rows of the first table after the heading that starts with `heading`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip().startswith(heading))
    rows, i = [], start + 1
    while not lines[i].startswith("|"):
        i += 1
    while i < len(lines) and lines[i].startswith("|"):
        rows.append(lines[i])
        i += 1
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in row.strip("|").split("|")))) for row in rows[2:]]


def readme_results() -> str:
    """The default's headline on arithmetic (reports/results.md): each method's mean
    avg@k over its seeds with the t interval over seeds and the seeds' spread, its
    paired difference over problems (seed-averaged) against the base model and grpo,
    and its difference from grpo over the seeds' scores (Welch)."""
    text = (ROOT / "reports" / "results.md").read_text()
    k = re.search(r"## Main table: avg@(\d+)", text).group(1)
    main = markdown_table(text, "Main table")
    seeds = {r["method"]: r for r in (markdown_table(text, "Seeds on arithmetic") if "### Seeds on arithmetic" in text
                                      else [])}
    vs_base = {r["method"]: r["arithmetic"] for r in markdown_table(text, f"avg@{k}: paired difference against base")}
    vs_grpo = {r["method"]: r["arithmetic"] for r in markdown_table(text, f"avg@{k}: paired difference against grpo")}
    out = [f"| method | arithmetic avg@{k}, mean over seeds [95% over seeds] | per seed (sd) | paired vs base "
           "[95% over problems] | paired vs grpo [95% over problems] | vs grpo [95% over seeds] |",
           "|---|---|---|---|---|---|"]
    for row in main:
        m = row["method"]
        seed = seeds.get(m)
        mean = seed["mean over seeds [95% t interval over seeds]"] if seed else row["arithmetic"].strip("*")
        spread = f"{seed['avg@k per seed']} ({seed['sd between seeds']})" if seed else "untrained" if m == "base" \
            else "one seed"
        over_seeds = (seed or {}).get("minus grpo, over seeds [95% Welch]", "").replace("–", "")
        out.append(f"| {m} | {mean} | {spread} | {vs_base.get(m, '')} | {vs_grpo.get(m, '')} | {over_seeds} |")
    return "\n".join(out)


def precision_row(precision: str, steps: int) -> dict[str, str]:
    text = (ROOT / "reports" / "precision.md").read_text()
    return next(r for r in markdown_table(text, "Precision") if r["precision"] == precision and r["steps"] == str(steps))


def default_result() -> str:
    """The default's result (reports/results.md): the summary's first sentence, the seeds
    table on arithmetic, and the claims' verdicts as the report words them."""
    text = (ROOT / "reports" / "results.md").read_text()
    summary = text.split("## Summary\n\n", 1)[1]
    first = summary.split("\n\n", 1)[0]
    seeds = section_table(text, "Seeds on arithmetic")
    claims = [line for line in summary.split("\n## ", 1)[0].splitlines() if line.startswith("- **")]
    if not claims:
        raise ValueError("reports/results.md: its summary lists no claims' verdicts; rerun `dvc repro report`")
    return "\n\n".join([first, "Arithmetic avg@2 per seed:", seeds, "The papers' claims at this run's scale:",
                          "\n".join(claims)])


def section_table(text: str, heading: str) -> str:
    """The first markdown table after the heading that starts with `heading`, as written."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip().startswith(heading))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return "\n".join(rows)


def signal_table() -> str:
    """What each training of the default learned from (reports/results.md)."""
    return section_table((ROOT / "reports" / "results.md").read_text(), "What each training learned from")


def sweep_choices() -> str:
    """The sweep's chosen configuration per method (reports/sweep.json), as a table."""
    import json

    rows = json.loads((ROOT / "reports" / "sweep.json").read_text())
    out = ["| method | chosen | validation avg@k [95%] | informative groups | constraint active |", "|---|---|---|---|---|"]
    for r in rows:
        if r["chosen"]:
            values = ", ".join(f"{k} {v:g}" for k, v in r.items() if k not in {
                "method", "name", "val", "low", "high", "informative", "kl_active", "chosen"})
            active = "–" if r["kl_active"] is None else f"{r['kl_active']:.2f}"
            out.append(f"| {r['method']} | {values} | {r['val']:.3f} [{r['low']:.3f}, {r['high']:.3f}] | "
                       f"{r['informative']:.2f} | {active} |")
    return "\n".join(out)


def bench_targets() -> str:
    """The benchmark's targets, measured and met or not (reports/bench.md), as it wrote them."""
    lines = (ROOT / "reports" / "bench.md").read_text().splitlines()
    table = []
    for line in lines[lines.index("## Targets") + 1:]:
        if table and not line.startswith("|"):
            break
        if line.startswith("|"):
            table.append(line)
    return "\n".join(table)


def precision_findings() -> str:
    """bf16 against fp32 for the default's grpo (reports/precision.md), as sentences."""
    text = (ROOT / "reports" / "precision.md").read_text()
    fp32, bf16, longer = precision_row("fp32", 10), precision_row("bf16", 10), precision_row("bf16", 20)
    diffs = [line for line in text.splitlines() if line.startswith("- bf16")]

    def paired(line: str) -> str:
        over_problems = re.search(r"over problems \(paired, seed-averaged\) (\S+ \[[^]]+\])", line).group(1)
        over_seeds = re.search(r"over seeds \(Welch t on the seed means\) (\S+ \[[^]]+\])", line).group(1)
        return f"{over_problems} over problems, {over_seeds} over the seed means (Welch t)"

    return (f"bf16 takes {bf16['step (s)']} s a step against fp32's {fp32['step (s)']} s. At {fp32['steps']} steps "
            f"it reaches {bf16['held-out avg@k [95% interval]']} (seeds {bf16['per seed']}) against fp32's "
            f"{fp32['held-out avg@k [95% interval]']} (seeds {fp32['per seed']}): {paired(diffs[0])}. At about equal "
            f"wall time (bf16 {longer['steps']} steps, {longer['training (s)']} s of training, against fp32 "
            f"{fp32['steps']} steps, {fp32['training (s)']} s) bf16 reaches {longer['held-out avg@k [95% interval]']}: "
            f"{paired(diffs[1])}")


def default_timing() -> str:
    """The default `dvc repro`'s wall time from scratch, per kind of stage, and a single
    seed's share of it (reports/bench.json: bench/run.py's repro part), as sentences."""
    import json

    bench = json.loads((ROOT / "reports" / "bench.json").read_text())
    repro = bench["parts"]["repro"]
    stages = repro["stages_s"]
    trains = [v for k, v in stages.items() if k.startswith("train@")]
    evals = [v for k, v in stages.items() if k.startswith("evaluate@") and k != "evaluate@base"]
    shared = sum(v for k, v in stages.items() if not k.startswith(("train@", "evaluate@")) or k == "evaluate@base")
    seed0 = shared + sum(v for k, v in stages.items() if k.startswith(("train@", "evaluate@")) and k.endswith("/seed0"))
    flags = ", ".join(bench["cpu_flags"])
    return (f"It took {repro['repro_full_s'] / 60:.1f} minutes from a fresh clone on {bench['machine']} ({flags}): "
            f"{len(trains)} trainings of {min(trains):.0f}-{max(trains):.0f} s, {len(evals) + 1} evaluations of "
            f"{min(evals):.0f}-{max(evals):.0f} s (the base model's {stages.get('evaluate@base', 0):.0f} s). One "
            f"seed (`dvc exp run -S 'seeds=[0]'`) is the seed-0 stages and the shared ones: {seed0 / 60:.1f} minutes "
            "of their measured times. A 2-core AVX2-only EPYC (family 23, 2 GHz) has run earlier defaults 3.5-5 "
            "times slower.")


def recipe_table() -> str:
    """One row per params/ file: its model, training data, methods (and the released models
    it evaluates) and paper profile, read from the file itself."""
    from rlvr.settings.load import read_yaml

    out = ["| file | model | train data | methods | paper profile |", "|---|---|---|---|---|"]
    for path in sorted((ROOT / "params").glob("*.yaml")):
        raw = read_yaml(path)
        methods, released = list(raw.get("methods") or {}), list(raw.get("checkpoints") or {})
        sets = [s["name"] if isinstance(s, dict) else s for s in raw["data"]["train_sets"]]  # a name, or an entry
        data = ", ".join(sets) if methods else "none: evaluation only"
        listed = "; ".join(part for part in (", ".join(methods), released and f"released: {', '.join(released)}")
                           if part)
        profile = (raw.get("report") or {}).get("paper_profile") or "-"
        out.append(f"| `params/{path.name}` | {raw['model']['source']} | {data} | {listed} | {profile} |")
    return "\n".join(out)


def memory_table() -> str:
    from rlvr.tools.memory import recipe_table

    return recipe_table(sorted((ROOT / "params").glob("*.yaml")))


GENERATORS = {"readme_results": readme_results, "default_timing": default_timing, "recipe_table": recipe_table,
              "signal_table": signal_table, "sweep_choices": sweep_choices, "memory_table": memory_table,
              "default_result": default_result, "bench_targets": bench_targets,
              "precision_findings": precision_findings}


def content(name: str, block: bool) -> str:
    return GENERATORS[name]().rstrip("\n") + ("\n" if block else "")


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(name, current content, what its source gives now) of every generated block of `text`."""
    return [(m.group(2), m.group(4), content(m.group(2), bool(m.group(3)))) for m in BLOCK.finditer(text)]


def rewrite(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + content(m.group(2), bool(m.group(3))) + m.group(5), text)


def main(argv: list[str] | None = None) -> int:
    import argparse

    argparse.ArgumentParser(description="Rewrite the generated blocks of " + ", ".join(FILES)
                            + " from their sources.").parse_args(argv)
    for name in FILES:
        path = ROOT / name
        text = path.read_text()
        new = rewrite(text)
        if new != text:
            path.write_text(new)
            print(f"rewrote {name}")
    return 0


if __name__ == "__main__":
    from rlvr.cli import tool

    tool(main)
