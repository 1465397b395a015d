"""The tables from small fixed outputs: they carry exactly the inputs, and intervals and marks follow the data."""

import json

import pytest
import report_helpers
import yaml
from report_helpers import RUNS, write_eval

from rlvr.report import build_report
from rlvr.runs import Run


def test_main_table_values_match_inputs(report):
    _, out = report
    t = out["tables"]["avg"]
    assert t["columns"] == ["arithmetic", "math500", "mean"]
    est = {name: [round(c[0], 6) for c in cells] for name, cells in t["rows"].items()}
    # base: a 1/2, b 0/2 -> 0.25; c 0/2; grpo: (1 + 0)/2, c 1/2; disco: (1 + 0.5)/2, c 1/2
    assert est == {"base": [0.25, 0.0, 0.125], "grpo": [0.5, 0.5, 0.5], "disco_logl": [0.75, 0.5, 0.625]}
    assert out["methods"] == ["base", "grpo", "disco_logl"]  # a run without outputs is left out
    for cells in t["rows"].values():
        assert all(lo <= e <= hi for e, lo, hi in cells)


def test_two_problems_resolve_nothing(report):
    root, out = report
    md = (root / "reports/results.md").read_text()
    assert out["tables"]["avg"]["best"] == {}  # no column's best is distinguishable from the runner-up
    assert "**" not in md.split("## Main table")[1].split("## pass@")[0].split("(paper")[0]
    assert "not distinguishable at this scale" in md


def test_paper_rows_and_gains(report, repo):
    root, _ = report
    md = (root / "reports/results.md").read_text()
    paper = yaml.safe_load((repo / "data/vendor/paper_results.yaml").read_text())
    disco_row = next(r for r in paper["1.5b"]["rows"] if r["method"] == "disco_logl")
    assert f"disco_logl (paper, {disco_row['mrl']})" in md
    assert "paired difference against base" in md and "paired difference against grpo" in md
    # disco - base on the mean: 0.625 - 0.125
    assert "| disco_logl | +0.500 [" in md


def test_a_clear_difference_is_marked_best(tmp_path, repo):
    many = {"arithmetic": [f"q{i}" for i in range(60)], "math500": [f"m{i}" for i in range(60)]}
    saved, report_helpers.BENCH = report_helpers.BENCH, many
    try:
        qs = [q for v in many.values() for q in v]
        write_eval(tmp_path, RUNS[0], {q: 0 for q in qs})
        write_eval(tmp_path, RUNS[1], {q: i % 3 == 0 for i, q in enumerate(qs)})
        write_eval(tmp_path, RUNS[2], {q: 2 * (i % 4 != 0) for i, q in enumerate(qs)})
        out = build_report(RUNS, tmp_path, tmp_path / "reports")
    finally:
        report_helpers.BENCH = saved
    assert out["tables"]["avg"]["best"] == {"arithmetic": "disco_logl", "math500": "disco_logl", "mean": "disco_logl"}
    md = (tmp_path / "reports/results.md").read_text()
    assert "| disco_logl | **0.750 [" in md
    assert md.count("| better |") >= 2  # disco and grpo over base


def test_difficulty_bias_shares(report):
    root, _ = report
    md = (root / "reports/results.md").read_text()
    # per-question accuracy: base a 0.5, b 0, c 0 -> 2/3 at 0%; grpo a 1, b 0, c 0.5; disco a 1, b 0.5, c 0.5
    assert "| base | 66.7% [" in md and "| grpo | 33.3% [" in md and "| disco_logl | 0.0% [" in md


def test_a_set_every_method_scores_zero_on_is_said_to_carry_nothing(tmp_path, repo):
    for run in RUNS:
        write_eval(tmp_path, run, {"a": 1 if run.method == "grpo" else 0, "b": 0, "c": 0})
    build_report(RUNS, tmp_path, tmp_path / "reports")
    md = (tmp_path / "reports/results.md").read_text()
    summary = md.split("## Summary")[1].split("\n## ")[0]
    assert "No information at this scale: math500 (1 problem, all at 0.000)" in summary
    assert "arithmetic" not in summary.split("No information")[1]
    assert "It still counts in every mean over sets, as in MLflow and `dvc exp show`" in summary
    # one mean everywhere: over every set, as the evaluation's own metrics.json and MLflow average them;
    # grpo got 1 of 2 samples right on one of arithmetic's 2 problems (0.25) and 0 on math500
    main = md.split("## Main table")[1].split("\n## ")[0]
    grpo = next(line for line in main.splitlines() if line.startswith("| grpo "))
    assert grpo.split("|")[-2].strip().startswith("0.125")
    assert json.loads((tmp_path / "reports/headline.json").read_text())["avg@2"]["grpo"] == 0.125
    # the first sentence: one problem each cannot tell the methods apart
    assert summary.strip().startswith("**No method is distinguishable here**: on mean avg@2 over the sets "
                                      "(arithmetic, math500)")


def test_a_released_checkpoint_is_a_marked_row_and_never_a_baseline(tmp_path, repo):
    runs = [Run("base"), Run("released", external=True), Run("grpo", 0), Run("siren", 0)]
    for run, c in zip(runs, ({"a": 0, "b": 0, "c": 0}, {"a": 2, "b": 2, "c": 2}, {"a": 1, "b": 0, "c": 1},
                             {"a": 2, "b": 1, "c": 1})):
        write_eval(tmp_path, run, c)
    build_report(runs, tmp_path, tmp_path / "reports", None, None, {"grpo": "grpo", "siren": "siren"})
    md = (tmp_path / "reports/results.md").read_text()
    main = md.split("## Main table")[1].split("\n## ")[0]
    assert "| released (released checkpoint) | " in main and "| grpo | " in main
    assert "not trained: released (`checkpoints:`)" in md and "seeds per method: grpo 1, siren 1." in md
    claims = md.split("## The papers' claims")[1].split("\n## ")[0]
    # the best baseline on maj@k is the best method trained here, not the (higher) released model
    assert "mean maj@2: siren - grpo" in claims and "released" not in claims


def test_ablation_table_pairs_each_variant_with_its_full_method(tmp_path, repo):
    runs = [Run("base"), Run("siren", 0), Run("siren_wo_anchor", 0), Run("grpo", 0)]
    for run, c in zip(runs, ({"a": 0, "b": 0, "c": 0}, {"a": 2, "b": 2, "c": 1}, {"a": 1, "b": 0, "c": 1},
                             {"a": 1, "b": 1, "c": 1})):
        write_eval(tmp_path, run, c)
    build_report(runs, tmp_path, tmp_path / "reports", ablations={"siren_wo_anchor": "siren", "absent": "siren"})
    md = (tmp_path / "reports/results.md").read_text()
    table = md.split("## Ablations")[1].split("\n## ")[0]
    # avg per question: a (1-2)/2, b (0-2)/2 (arithmetic: -0.75), c (1-1)/2 (math500: 0): mean over sets -0.375
    row = next(line for line in table.splitlines() if line.startswith("| siren_wo_anchor | siren |"))
    assert row.split(" | ")[2].startswith("-0.375 [") or row.split(" | ")[2].startswith("-0.38 [")
    assert "absent" not in table and "| grpo" not in table
    build_report(runs[:2], tmp_path, tmp_path / "reports2", ablations={"siren_wo_anchor": "siren"})
    assert "## Ablations" not in (tmp_path / "reports2/results.md").read_text()


def test_the_papers_ablation_ordering_by_hand(tmp_path, repo):
    """Every component matters (each variant below its full method) and the
    clipped score hurts most: its drop (1 on every problem) minus the KL
    penalty's (0.5) is +0.5 on every problem."""
    runs = [Run("base"), Run("disco_lratio", 0), Run("disco_lratio_clipped", 0), Run("disco_logl", 0),
            Run("disco_logl_kl_penalty", 0)]
    for run, c in zip(runs, ({"a": 0, "b": 0, "c": 0}, {"a": 2, "b": 2, "c": 2}, {"a": 0, "b": 0, "c": 0},
                             {"a": 2, "b": 2, "c": 2}, {"a": 1, "b": 1, "c": 1})):
        write_eval(tmp_path, run, c)
    build_report(runs, tmp_path, tmp_path / "reports", repo / "data/vendor/paper_results.yaml", "1.5b",
                 {n.method: "disco" for n in runs[1:]},
                 {"disco_lratio_clipped": "disco_lratio", "disco_logl_kl_penalty": "disco_logl"})
    md = (tmp_path / "reports/results.md").read_text().split("The paper's ordering of its ablations:")[1]
    assert "| every component matters | variants whose avg@2 interval lies below their full method's | 2 of 2 | " \
           "supported | DisCO paper's ablation study (1.5B) |" in md
    assert "| disco_lratio_clipped hurts more than disco_logl_kl_penalty | avg@2 drop (full - variant): " \
           "disco_lratio_clipped - disco_logl_kl_penalty | +0.500 [+0.500, +0.500] | supported |" in md


def test_diversity_section_pass_curve_and_their_claims(tmp_path, repo):
    """Distinct answers and perplexity per problem (problems.jsonl), their
    means with intervals, the pass@k curve from the unbiased estimator, and the
    claim rows SIREN's analysis makes."""
    from rlvr.report.inputs import load_results

    runs = [Run("base"), Run("grpo", 0), Run("siren", 0)]
    for run, c in zip(runs, ({"a": 1, "b": 0, "c": 0}, {"a": 2, "b": 0, "c": 1}, {"a": 2, "b": 1, "c": 1})):
        write_eval(tmp_path, run, c, k=4)
    for run, distinct in zip(runs, (3, 1, 2)):  # add the diversity columns
        path = tmp_path / run.eval_dir / "problems.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**r, "distinct": distinct + (r["id"] == "a"), "perplexity": 1.5})
                                + "\n" for r in rows))
    results = load_results(tmp_path, runs)
    # pass@j of c correct of 4: a problem with c = 1 gives 1/4, 1/2, 3/4, 1 for j = 1..4
    base = dict(results["base"].pass_curve())  # arithmetic a: c=1, b: 0 -> mean; math500 c: 0
    assert base[1] == pytest.approx((0.25 + 0) / 2 / 2) and base[4] == pytest.approx((1 + 0) / 2 / 2)
    build_report(runs, tmp_path, tmp_path / "reports", None, None, {"grpo": "grpo", "siren": "siren"})
    md = (tmp_path / "reports/results.md").read_text()
    table = md.split("## Diversity")[1].split("\n## ")[0]
    # siren: a 3, b 2 (arithmetic mean 2.5), c 2: mean over sets 2.25
    assert "| siren | 2.250 [" in table and "| 1.500 [1.500, 1.500] |" in table
    claims = md.split("## The papers' claims")[1].split("\n## ")[0]
    assert "| siren gives more distinct answers than grpo | distinct answers per problem: siren - grpo | +1 [+1, +1]" \
        in claims
    assert (tmp_path / "reports/figures/pass_at_k.png").stat().st_size > 10_000


def test_the_appendix_compares_the_graders(tmp_path):
    for run, correct in zip(RUNS, ({"a": 1, "b": 0, "c": 0}, {"a": 2, "b": 0, "c": 1}, {"a": 2, "b": 1, "c": 1})):
        write_eval(tmp_path, run, correct)
    pair = {"both": 5, "ours_only": 2, "theirs_only": 1, "neither": 2,
            "examples": [{"golds": ["116"], "response": "The answer is $116$.", "ours": True, "theirs": False,
                          "kind": "no_box"}]}
    agreement = {"answer_after": None, "synthetic": {
        "n": 10, "correct": {"math_verify": 7, "deepscaler": 6, "siren_official": 6},
        "pairs": {"deepscaler": pair, "siren_official": pair},
        "by_kind": {"no_box": {"n": 10, "math_verify": 7, "deepscaler": 6, "siren_official": 6}}}}
    (tmp_path / "reports" / "grader_agreement.json").write_text(json.dumps(agreement))
    build_report(RUNS, tmp_path, tmp_path / "reports")
    md = (tmp_path / "reports/results.md").read_text()
    appendix = md.split("## Appendix: the graders compared")[1]
    assert "| synthetic endings (10) | deepscaler | 7 / 6 | 5 | 2 | 1 | 2 | 70.0% |" in appendix
    assert "| no_box | 10 | 7 | 6 | 6 |" in appendix and "Graded by math_verify" in md
    assert "- [Appendix: the graders compared](#appendix-the-graders-compared)" in md

