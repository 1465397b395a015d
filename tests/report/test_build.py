"""The whole report from small fixed outputs: its summary leads with the answer, its outputs
for DVC, and the output is deterministic."""

import csv
import json

import pytest
import report_helpers
from report_helpers import RUNS, write_eval

from rlvr.report import build_report
from rlvr.runs import Run


def test_headline_and_curves_for_dvc(report):
    root, _ = report
    head = json.loads((root / "reports/headline.json").read_text())
    assert head["avg@2"] == {"base": 0.125, "grpo": 0.5, "disco_logl": 0.625}
    with open(root / "reports/curves.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["run"], r["step"]) for r in rows][:2] == [("grpo", "1"), ("grpo", "2")]
    assert {r["run"] for r in rows} == {"grpo", "disco_logl"} and "reward_mean" in rows[0]


def test_the_report_leads_with_its_answer(report):
    """Every claim row's verdict is in the summary on top, with its interval;
    the main-table figure holds every evaluated method; a set where every
    method scores the same on every problem is said to carry no information;
    the contents link every detail heading."""
    from rlvr.report.claims import all_claim_rows
    from rlvr.report.format import slug
    from rlvr.report.inputs import load_results

    root, out = report
    md = (root / "reports/results.md").read_text()
    summary = md.split("## Summary")[1].split("\n## ")[0]
    rows = all_claim_rows(load_results(root, RUNS), {"grpo": "grpo", "disco_logl": "disco"}, 2)
    assert rows
    for claim, _, estimate, _, verdict, _ in rows:
        assert f"- **{verdict}**: {claim} (" in summary and estimate in summary
    assert md.index("## Summary") < md.index("## The papers' claims") < md.index("## Main table")
    assert "No information at this scale" not in summary  # every fixture set has differing scores
    assert out["methods"] == ["base", "grpo", "disco_logl"]
    # the summary figure is drawn from the main table, which has a row for every evaluated method
    assert list(out["tables"]["avg"]["rows"]) == out["methods"]
    assert "](figures/scores.png)" in summary and (root / "reports/figures/scores.png").stat().st_size > 10_000
    contents = md.split("## Contents")[1].split("\n## ")[0]
    for heading in [line[3:] for line in md.split("## Contents")[1].splitlines() if line.startswith("## ")]:
        assert f"(#{slug(heading)})" in contents, heading
    html = (root / "reports/index.html").read_text()
    assert f'id="{slug("Main table: avg@2 (pass@1 averaged over k samples)")}"' in html


def test_a_clear_best_is_named_in_the_first_sentence(tmp_path, repo):
    many = {"arithmetic": [f"q{i}" for i in range(40)], "math500": ["c"]}
    old, report_helpers.BENCH = report_helpers.BENCH, many
    try:
        for run, right in zip(RUNS, (0, 0, 2)):
            write_eval(tmp_path, run, {q: right for qs in many.values() for q in qs})
        build_report(RUNS, tmp_path, tmp_path / "reports")
    finally:
        report_helpers.BENCH = old
    summary = (tmp_path / "reports/results.md").read_text().split("## Summary")[1]
    # one seed each: the lead over problems is real, but one seed cannot name a best method
    assert summary.strip().startswith("**disco_logl scores highest here, on one seed**: mean avg@2 over the sets "
                                      "(arithmetic, math500) 1.000, +1.000 [+1.000, +1.000] over the runner-up "
                                      "base, paired over problems. One seed cannot name a best method")


@pytest.mark.parametrize("spread, named", [(0, True), (1, False)])
def test_a_best_method_is_named_only_beyond_the_spread_between_seeds(tmp_path, repo, spread, named):
    """Three seeds each: disco_logl leads grpo by 0.25 on every seed (named best), or
    its seeds scatter from 0 to 1 around the same mean (its lead is within the spread)."""
    many = {"arithmetic": [f"q{i}" for i in range(40)]}
    old, report_helpers.BENCH = report_helpers.BENCH, many
    runs = [Run("base")] + [Run(m, s) for m in ("grpo", "disco_logl") for s in (0, 1, 2)]
    try:
        for run in runs:
            if run.method == "base":
                right = lambda i: 0  # noqa: E731
            elif run.method == "grpo":
                right = lambda i: i % 2  # noqa: E731  0.25 on every seed
            else:
                shift = {0: -spread, 1: 0, 2: spread}[run.seed]
                right = lambda i, s=shift: max(0, min(2, 1 + s))  # noqa: E731  0.5, or 0 / 0.5 / 1
            write_eval(tmp_path, run, {q: right(i) for i, q in enumerate(many["arithmetic"])})
        build_report(runs, tmp_path, tmp_path / "reports")
    finally:
        report_helpers.BENCH = old
    md = (tmp_path / "reports/results.md").read_text()
    first = md.split("## Summary")[1].strip().split("\n")[0]
    gains = md.split("### avg@2: paired difference against grpo")[1].split("##")[0]
    main = md.split("## Main table")[1].split("###")[0]
    # the same lead over problems either way (+0.250, its bootstrap interval above 0); the seeds decide
    # the words and the bold
    row = next(line for line in gains.splitlines() if line.startswith("| disco_logl |")).split(" | ")
    assert row[2].startswith("+0.250 [+0.") and float(row[2].split("[")[1].split(",")[0]) > 0
    if named:
        assert first.startswith("**disco_logl is the best method here**") and "over the seeds' means +0.250" in first
        assert gains.strip().endswith("| better |") and "**0.500" in main
    else:
        assert first.startswith("**disco_logl scores highest here, within the spread between seeds**")
        # seeds 0 / 0.5 / 1 against 0.25 on each: Welch 0.25 +- t(2) 4.303 x 0.5 / sqrt(3)
        assert "| +0.250 [-0.992, +1.492] | within the spread between seeds |" in gains and "**" not in main
    seeds = md.split("### Seeds on arithmetic")[1].split("##")[0]
    lead = "+0.250 [+0.250, +0.250]" if named else "+0.250 [-0.992, +1.492]"
    assert seeds.count(f"| {lead} |") == 1 and "| grpo | s0: 0.250, s1: 0.250, s2: 0.250 |" in seeds


def test_the_report_is_byte_for_byte_reproducible(report, repo):
    root, _ = report
    first = {p.name: p.read_bytes() for p in (root / "reports").rglob("*") if p.is_file()}
    build_report(RUNS, root, root / "reports", repo / "data/vendor/paper_results.yaml", "1.5b",
                 {"grpo": "grpo", "disco_logl": "disco"})
    again = {p.name: p.read_bytes() for p in (root / "reports").rglob("*") if p.is_file()}
    assert first == again


def test_no_evaluations_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the evaluate stages first"):
        build_report(RUNS, tmp_path, tmp_path / "out")

