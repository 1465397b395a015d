"""The report from small fixed train/eval outputs: tables carry exactly the
inputs, intervals and marks follow the data, the output is deterministic."""

import csv
import json
from pathlib import Path

import pytest
import yaml
from helpers import REPO

from rlvr.report import build_report, per_problem
from rlvr.runs import Run

BENCH = {"arithmetic": ["a", "b"], "math500": ["c"]}


def write_eval(root: Path, run: Run, correct: dict[str, int], k: int = 2, majority=None, levels=None):
    """correct: problem id -> correct samples out of k; metrics.json is derived the same way."""
    d = root / run.eval_dir
    d.mkdir(parents=True)
    rows = [{"benchmark": b, "id": q, "level": (levels or {}).get(q), "k": k, "correct": correct[q],
             "majority": (majority or {}).get(q, correct[q] * 2 > k)} for b, qs in BENCH.items() for q in qs]
    (d / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    bench = {b: {f"avg@{k}": sum(correct[q] for q in qs) / (k * len(qs)), "n_problems": float(len(qs))}
             for b, qs in BENCH.items()}
    if levels:
        bench["arithmetic"]["levels"] = {str(levels[q]): {f"avg@{k}": correct[q] / k} for q in BENCH["arithmetic"]}
    (d / "metrics.json").write_text(json.dumps({"k": k, "mean": {}, "benchmarks": bench}))
    if run.trained and not (root / run.train_dir / "steps.csv").exists():
        write_steps(root, run, [0.1, 0.2])  # a trained run always has its step log (the report requires it)


def write_steps(root: Path, run: Run, rewards: list[float], entropy_slope: float = -0.1, extra=None):
    d = root / run.train_dir
    d.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(["step", "reward_mean", "entropy", "kl", "response_length", "topp_entropy",
                                 "zero_variance_groups", "all_correct_groups", "all_wrong_groups", "kl_active",
                                 "clip_frac", *(extra or {})]))
    with open(d / "steps.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for i, r in enumerate(rewards, start=1):
            w.writerow({"step": i, "reward_mean": r, "entropy": 1.0 + entropy_slope * i, "kl": 1e-4 * i,
                        "response_length": 50 + i, "topp_entropy": 0.5, "zero_variance_groups": 0.5,
                        "all_correct_groups": 0.05 * i, "all_wrong_groups": 0.5 - 0.05 * i, "kl_active": 0.5, "clip_frac": 0.1, **{k: v(i) for k, v in (extra or {}).items()}})


RUNS = [Run("base"), Run("grpo", 0), Run("disco_logl", 0)]


@pytest.fixture
def report(tmp_path, repo):
    levels = {"a": 1, "b": 2}
    write_eval(tmp_path, RUNS[0], {"a": 1, "b": 0, "c": 0}, levels=levels)
    write_eval(tmp_path, RUNS[1], {"a": 2, "b": 0, "c": 1}, levels=levels)
    write_eval(tmp_path, RUNS[2], {"a": 2, "b": 1, "c": 1}, levels=levels)
    write_steps(tmp_path, RUNS[1], [0.1, 0.2, 0.3, 0.4], entropy_slope=-0.2)
    write_steps(tmp_path, RUNS[2], [0.1, 0.3, 0.5, 0.6], entropy_slope=0.0)
    out = build_report(RUNS + [Run("missing", 0)], tmp_path, tmp_path / "reports",
                       repo / "data/vendor/paper_results.yaml", "1.5b",
                       {"grpo": "grpo", "disco_logl": "disco"})
    return tmp_path, out


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
    global BENCH
    saved, BENCH = BENCH, many
    try:
        qs = [q for v in many.values() for q in v]
        write_eval(tmp_path, RUNS[0], {q: 0 for q in qs})
        write_eval(tmp_path, RUNS[1], {q: i % 3 == 0 for i, q in enumerate(qs)})
        write_eval(tmp_path, RUNS[2], {q: 2 * (i % 4 != 0) for i, q in enumerate(qs)})
        out = build_report(RUNS, tmp_path, tmp_path / "reports")
    finally:
        BENCH = saved
    assert out["tables"]["avg"]["best"] == {"arithmetic": "disco_logl", "math500": "disco_logl", "mean": "disco_logl"}
    md = (tmp_path / "reports/results.md").read_text()
    assert "| disco_logl | **0.750 [" in md
    assert md.count("| better |") >= 2  # disco and grpo over base


def test_difficulty_bias_shares(report):
    root, _ = report
    md = (root / "reports/results.md").read_text()
    # per-question accuracy: base a 0.5, b 0, c 0 -> 2/3 at 0%; grpo a 1, b 0, c 0.5; disco a 1, b 0.5, c 0.5
    assert "| base | 66.7% [" in md and "| grpo | 33.3% [" in md and "| disco_logl | 0.0% [" in md


def test_claims_table(report):
    root, _ = report
    md = (root / "reports/results.md").read_text()
    claims = md.split("## The papers' claims")[1].split("## Figures")[0]
    # GRPO's entropy: 1 - 0.2 * step, an exact line: "falls" is supported with a zero-width interval
    assert "| GRPO's entropy falls during training | minus the slope of entropy per step (grpo) | +0.2 [+0.2, +0.2]" \
        " | – | supported (one seed) |" in claims
    assert "| disco_logl's entropy stays stable | entropy slope per step (disco_logl), within +-" in claims
    assert "| disco_logl above grpo on accuracy |" in claims and "inconclusive" in claims
    # the paper's size of the same statistic (profile 1.5b: DisCO log-L 0.533 - GRPO 0.457), against our interval
    row = next(line for line in claims.splitlines() if line.startswith("| disco_logl above grpo"))
    assert "| +0.076 (inside ours) |" in row or "| +0.076 (outside ours) |" in row
    # one seed per method: every verdict says so, and the page says what the intervals leave out
    assert "(one seed): a run with a single seed" in claims
    assert "not the randomness of training" in md.split("## Main table")[0]


def test_headline_and_curves_for_dvc(report):
    root, _ = report
    head = json.loads((root / "reports/headline.json").read_text())
    assert head["avg@2"] == {"base": 0.125, "grpo": 0.5, "disco_logl": 0.625}
    with open(root / "reports/curves.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["run"], r["step"]) for r in rows][:2] == [("grpo", "1"), ("grpo", "2")]
    assert {r["run"] for r in rows} == {"grpo", "disco_logl"} and "reward_mean" in rows[0]


def test_figures_and_self_contained_html(report):
    root, out = report
    names = sorted(Path(f).name for f in out["figures"])
    assert names == ["constraint.png", "difficulty_bias.png", "difficulty_training.png", "entropy_groups.png",
                     "kl_length.png", "pass_at_k.png", "scores.png", "training_dynamics.png"]
    for f in out["figures"]:
        assert Path(f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and Path(f).stat().st_size > 10_000
    html = (root / "reports/index.html").read_text()
    assert html.count("data:image/png;base64,") == 8 and "<table>" in html
    # the summary's figure comes first, before any table, with its caption once, under it
    from rlvr.report.figure_set import CAPTIONS

    assert html.index(f'alt="{CAPTIONS["scores"]}"') < html.index("<table>")
    assert html.count(f"<figcaption>{CAPTIONS['scores']}</figcaption>") == 1
    assert html.count(CAPTIONS["training_dynamics"]) == 2  # alt text and caption; not a third time as a paragraph
    assert "text-align:left" in html
    md = (root / "reports/results.md").read_text()
    assert all(f"*{CAPTIONS[Path(f).stem]}*" in md for f in out["figures"])  # every figure says how to read it


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


def test_a_clear_best_is_named_in_the_first_sentence(tmp_path, repo):
    global BENCH
    many = {"arithmetic": [f"q{i}" for i in range(40)], "math500": ["c"]}
    old, BENCH = BENCH, many
    try:
        for run, right in zip(RUNS, (0, 0, 2)):
            write_eval(tmp_path, run, {q: right for qs in many.values() for q in qs})
        build_report(RUNS, tmp_path, tmp_path / "reports")
    finally:
        BENCH = old
    summary = (tmp_path / "reports/results.md").read_text().split("## Summary")[1]
    # one seed each: the lead over problems is real, but one seed cannot name a best method
    assert summary.strip().startswith("**disco_logl scores highest here, on one seed**: mean avg@2 over the sets "
                                      "(arithmetic, math500) 1.000, +1.000 [+1.000, +1.000] over the runner-up "
                                      "base, paired over problems. One seed cannot name a best method")


@pytest.mark.parametrize("spread, named", [(0, True), (1, False)])
def test_a_best_method_is_named_only_beyond_the_spread_between_seeds(tmp_path, repo, spread, named):
    """Three seeds each: disco_logl leads grpo by 0.25 on every seed (named best), or
    its seeds scatter from 0 to 1 around the same mean (its lead is within the spread)."""
    global BENCH
    many = {"arithmetic": [f"q{i}" for i in range(40)]}
    old, BENCH = BENCH, many
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
        BENCH = old
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


def test_seeds_are_averaged_and_their_spread_shown(tmp_path):
    write_eval(tmp_path, RUNS[0], {"a": 0, "b": 0, "c": 0})
    write_eval(tmp_path, Run("grpo", 0), {"a": 2, "b": 0, "c": 0})
    write_eval(tmp_path, Run("grpo", 1), {"a": 0, "b": 0, "c": 2})
    out = build_report([RUNS[0], Run("grpo", 0), Run("grpo", 1)], tmp_path, tmp_path / "reports")
    # seed-averaged problems: a 0.5, b 0, c 0.5 -> arithmetic 0.25, math500 0.5, mean 0.375
    assert [round(c[0], 6) for c in out["tables"]["avg"]["rows"]["grpo"]] == [0.25, 0.5, 0.375]
    md = (tmp_path / "reports/results.md").read_text()
    # seed 0: (0.5 + 0) / 2 = 0.25; seed 1: (0 + 1) / 2 = 0.5 -> sd 0.177, range 0.25; the mean's t interval
    # over 2 seeds: 0.375 +- t(0.975, 1) 12.706 x 0.177 / sqrt(2) = 0.375 +- 1.588
    assert "| grpo | s0: 0.250, s1: 0.500 | 0.375 [-1.213, 1.963] | 0.177 | 0.250 |" in md
    # on arithmetic alone: seed 0 0.5, seed 1 0 -> 0.25 +- 12.706 x 0.354 / sqrt(2) = 0.25 +- 3.177
    arithmetic = md.split("### Seeds on arithmetic")[1].split("###")[0]
    assert "| grpo | s0: 0.500, s1: 0.000 | 0.250 [-2.927, 3.427] | 0.354 | 0.500 |" in arithmetic
    assert "(one seed)" not in md and "not the randomness of training" not in md  # two seeds: nothing to caveat


def test_checkpoint_selection_table(tmp_path):
    """The final model and the best on validation, both scored on the test
    sets; the selection is the one training made, not a max over test scores."""
    write_eval(tmp_path, RUNS[0], {"a": 0, "b": 0, "c": 0})
    write_eval(tmp_path, RUNS[1], {"a": 1, "b": 1, "c": 1})
    by_step = {"settings": "x", "steps": {
        "5": {"id": "h-5", "best": True, "validation": 0.625, "problems": [[0, False], [0, False], [2, True]]},
        "10": {"id": "h-10", "best": False, "validation": 0.5, "problems": [[1, False], [1, False], [1, False]]}}}
    (tmp_path / RUNS[1].eval_dir / "by_step.json").write_text(json.dumps(by_step))
    build_report(RUNS[:2], tmp_path, tmp_path / "reports")
    md = (tmp_path / "reports/results.md").read_text()
    assert "never on the test sets" in md
    # final: arithmetic 0.5, math500 0.5; best (step 5): arithmetic 0 and math500 1 in every resample -> 0.5
    assert "| grpo | 10 | 0.500 [0.500, 0.500] | 5 | 0.625 | 0.500 [0.500, 0.500] |" in md


def test_no_checkpoint_selection_without_validation(tmp_path):
    write_eval(tmp_path, RUNS[0], {"a": 0, "b": 0, "c": 0})
    write_eval(tmp_path, RUNS[1], {"a": 1, "b": 1, "c": 1})
    by_step = {"settings": "x", "steps": {"10": {"id": "h-10", "best": False, "validation": None,
                                                 "problems": [[1, False], [1, False], [1, False]]}}}
    (tmp_path / RUNS[1].eval_dir / "by_step.json").write_text(json.dumps(by_step))
    build_report(RUNS[:2], tmp_path, tmp_path / "reports")
    assert "Checkpoint selection" not in (tmp_path / "reports/results.md").read_text()


def test_per_problem_values():
    rows = [{"benchmark": "x", "correct": 1, "k": 4, "majority": False},
            {"benchmark": "x", "correct": 0, "k": 4, "majority": False}]
    assert per_problem(rows, "avg")["x"].tolist() == [0.25, 0.0]
    assert per_problem(rows, "pass")["x"].tolist() == [1.0, 0.0]
    assert per_problem(rows, "maj")["x"].tolist() == [0.0, 0.0]


def test_no_evaluations_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the evaluate stages first"):
        build_report(RUNS, tmp_path, tmp_path / "out")


@pytest.mark.parametrize("recipe", sorted((REPO / "params").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_each_recipe_reports_its_own_models_published_numbers(recipe, repo):
    """A recipe's paper_profile is its model's entry: its own figures, and the list of what is not published."""
    from rlvr.report.published import paper_notes

    params = yaml.safe_load(recipe.read_text())
    paper = yaml.safe_load((repo / "data/vendor/paper_results.yaml").read_text())
    entry = paper[params["report"]["paper_profile"]]
    assert entry["base_model"] == params["model"]["source"]
    methods = ["base", *params["methods"]]
    notes = paper_notes(paper, params["report"]["paper_profile"], methods)
    for key, value in (entry.get("headline") or {}).items():
        assert f"- {key}: {value}" in notes
    others = {v for name, e in paper.items() if isinstance(e, dict) and name != params["report"]["paper_profile"]
              for v in (e.get("headline") or {}).values()} - set((entry.get("headline") or {}).values())
    assert not any(f": {v}\n" in notes + "\n" for v in others)  # no other model's figures
    unpublished = [m for m in methods if m not in {r["method"] for r in entry.get("rows", [])}]
    assert ("no published row for " + ", ".join(unpublished) in notes) == bool(unpublished)
    if "siren" in recipe.stem and "dr_grpo" in params["methods"]:
        assert "no published row for base, siren, dr_grpo" in notes and "Not available:" in notes


def test_an_unknown_paper_profile_names_the_valid_ones(tmp_path, repo):
    with pytest.raises(ValueError, match="did you mean 'siren_qwen2.5_math_7b'.*valid: 1.5b, 7b"):
        build_report(RUNS, tmp_path, tmp_path / "reports", repo / "data/vendor/paper_results.yaml",
                     "siren_qwen2.5_math_7", {})


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


def test_published_sizes_and_whether_our_interval_holds_them():
    from rlvr.report.claims import headline_gain, published_cell, table_gain

    entry = {"source": "its table", "rows": [
        {"method": "grpo", "avg": 0.457}, {"method": "disco_logl", "avg": 0.533}, {"method": "grpo", "avg": 0.1},
        {"method": "dsr", "mrl": "24k/8k", "avg": 0.488}, {"method": "dsr", "mrl": "24k/32k", "avg": 0.525}],
        "headline": {"maj_at_k_gain_over_best_baseline": 4.8, "aime": 6.6},
        "headline_sources": {"maj_at_k_gain_over_best_baseline": "its abstract"}}
    assert table_gain(entry, "disco_logl", "grpo") == pytest.approx(0.076)  # the first row of each method
    assert table_gain(entry, "disco_logl", "dsr", "24k/32k") == pytest.approx(0.008)  # the reference's named row
    assert table_gain(entry, "disco_logl", "dapo") is None and table_gain({}, "a", "b") is None
    assert headline_gain("maj_at_k_gain_over_best_baseline")(entry, "siren", "grpo") == pytest.approx(0.048)
    # a value without a source is never compared with
    assert table_gain({**entry, "source": None}, "disco_logl", "grpo") is None
    assert headline_gain("aime")(entry, "siren", "grpo") is None
    assert published_cell(0.076, 0.01, 0.08) == "+0.076 (inside ours)"
    assert published_cell(0.076, 0.08, 0.1) == "+0.076 (outside ours)"
    assert published_cell(None, 0.0, 1.0) == "–"


def test_siren_entropy_claims_compare_the_slopes_with_each_baseline(tmp_path, repo):
    """SIREN's claim on the entropy its trainer logs (top-p) and on the full entropy:
    slopes per step, SIREN's minus each baseline's; no invented band."""
    runs = [Run("base"), Run("grpo", 0), Run("siren", 0), Run("entropy_reg", 0)]
    for run, c in zip(runs, ({"a": 1, "b": 0, "c": 0}, {"a": 2, "b": 0, "c": 1}, {"a": 2, "b": 1, "c": 1},
                             {"a": 2, "b": 1, "c": 0})):
        write_eval(tmp_path, run, c)
    slopes = {"grpo": -0.1, "siren": -0.02, "entropy_reg": 0.05}
    for run in runs[1:]:
        write_steps(tmp_path, run, [0.1, 0.2, 0.3, 0.4, 0.5], entropy_slope=slopes[run.method],
                    extra={"topp_entropy": lambda i, m=run.method: 0.5 + 2 * slopes[m] * i})
    build_report(runs, tmp_path, tmp_path / "reports", repo / "data/vendor/paper_results.yaml",
                 "siren_qwen2.5_math_7b", {"grpo": "grpo", "siren": "siren", "entropy_reg": "entropy_reg"})
    claims = (tmp_path / "reports/results.md").read_text().split("## The papers' claims")[1].split("\n## ")[0]
    assert "anchor" not in claims and "claimed within" not in claims
    lines = {line.split(" | ")[0][2:]: line for line in claims.splitlines() if line.startswith("| siren")}
    # against a baseline whose entropy collapses (grpo): SIREN's falls less
    assert "+0.16 [+0.16, +0.16]" in lines["siren's top-p entropy falls less than grpo's (no collapse)"]
    assert "supported" in lines["siren's top-p entropy falls less than grpo's (no collapse)"]
    # against naive regularization, whose entropy the paper says explodes: SIREN's rises less
    assert "+0.14 [+0.14, +0.14]" in lines["siren's top-p entropy rises less than entropy_reg's (no explosion)"]
    assert "supported" in lines["siren's top-p entropy rises less than entropy_reg's (no explosion)"]
    assert "siren's top-p entropy falls less than entropy_reg's (no collapse)" not in lines
    assert "+0.08 [+0.08, +0.08]" in lines["siren's full-vocabulary entropy falls less than grpo's (no collapse)"]
    # kept in a band: the first step's 0.46 allows +-0.2 x 0.46 / 4 steps = 0.023 per step; it falls 0.04
    assert "-0.04 [-0.04, -0.04]" in lines["siren's top-p entropy stays in a band"]
    assert "within +-0.023" in lines["siren's top-p entropy stays in a band"]
    assert "contradicted" in lines["siren's top-p entropy stays in a band"]
    # diversity is claimed against the collapsing baselines only
    assert not any("entropy_reg" in k for k in lines if "perplexity" in k or "distinct" in k)
    # the maj@k gain over the best baseline: the 4.8 points have no source, so no published size is shown
    assert "| – |" in lines["siren gains maj@k over the best baseline"]


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


def test_an_evaluated_training_without_its_step_log_is_an_error(tmp_path, repo):
    write_eval(tmp_path, RUNS[1], {"a": 2, "b": 0, "c": 1})
    steps = tmp_path / RUNS[1].train_dir / "steps.csv"
    steps.write_text(steps.read_text().splitlines()[0] + "\n")  # the header alone
    with pytest.raises(FileNotFoundError, match="steps.csv is empty but its run was evaluated"):
        build_report(RUNS[1:2], tmp_path, tmp_path / "reports")
    steps.unlink()
    with pytest.raises(FileNotFoundError, match="steps.csv is missing"):
        build_report(RUNS[1:2], tmp_path, tmp_path / "reports")


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


def test_the_aime_claim_reads_only_aime_and_only_where_it_was_evaluated(tmp_path, repo, monkeypatch):
    from rlvr.report.claims import all_claim_rows
    from rlvr.report.inputs import load_results

    runs = [Run("base"), Run("grpo", 0), Run("siren", 0)]
    monkeypatch.setitem(globals(), "BENCH", {"aime24": ["a", "b"], "math500": ["c"]})
    for run, c in zip(runs, ({"a": 0, "b": 0, "c": 0}, {"a": 0, "b": 1, "c": 2}, {"a": 2, "b": 1, "c": 0})):
        write_eval(tmp_path, run, c)
    rows = all_claim_rows(load_results(tmp_path, runs), {"grpo": "grpo", "siren": "siren"}, 2,
                          {"headline": {"aime24_25_maj_at_k_gain": 6.6},
                           "headline_sources": {"aime24_25_maj_at_k_gain": "abstract"}})
    aime = next(r for r in rows if "AIME24/25" in r[0])
    # maj@2 = correct * 2 > k: siren a 1, b 0; grpo a 0, b 0 -> +0.5 on aime24 (math500's c is not read)
    assert aime[2].startswith("+0.5 [") and aime[3].startswith("+0.066 (")
    monkeypatch.setitem(globals(), "BENCH", {"math500": ["c"]})
    other = tmp_path / "other"
    for run, c in zip(runs, ({"c": 0}, {"c": 2}, {"c": 0})):
        write_eval(other, run, c)
    assert not any("AIME24/25" in r[0] for r in all_claim_rows(load_results(other, runs), {"siren": "siren"}, 2))


def test_claims_are_about_main_methods_against_the_papers_own_baselines(tmp_path, repo):
    """No claim row on an ablation variant; the best baseline is one of the
    paper's (a DisCO method trained beside SIREN is not); the difficulty bias
    is GRPO_RW against GRPO; Fig. 2's statements are rows of their own."""
    runs = [Run("base"), Run("grpo", 0), Run("siren", 0), Run("siren_wo_anchor", 0), Run("disco_logl", 0),
            Run("grpo_rw", 0), Run("dapo", 0), Run("dr_grpo", 0)]
    for run, c in zip(runs, ({"a": 0, "b": 0, "c": 0}, {"a": 1, "b": 1, "c": 0}, {"a": 2, "b": 1, "c": 1},
                             {"a": 1, "b": 0, "c": 1}, {"a": 2, "b": 2, "c": 2}, {"a": 2, "b": 0, "c": 0},
                             {"a": 1, "b": 0, "c": 0}, {"a": 0, "b": 1, "c": 0})):
        write_eval(tmp_path, run, c)
    for run in runs[1:]:
        write_steps(tmp_path, run, [0.1, 0.2, 0.3, 0.4, 0.5], entropy_slope=0.05 if run.method == "dapo" else -0.1)
    objectives = {"grpo": "grpo", "siren": "siren", "siren_wo_anchor": "siren", "disco_logl": "disco",
                  "grpo_rw": "grpo_rw", "dapo": "dapo", "dr_grpo": "dr_grpo"}
    build_report(runs, tmp_path, tmp_path / "reports", repo / "data/vendor/paper_results.yaml",
                 "siren_qwen2.5_math_7b", objectives, {"siren_wo_anchor": "siren"})
    claims = (tmp_path / "reports/results.md").read_text().split("## The papers' claims")[1].split("\n## ")[0]
    rows = [line for line in claims.splitlines() if line.startswith("| ") and not line.startswith("| claim")]
    assert not any(r.startswith("| siren_wo_anchor") for r in rows)
    best = next(r for r in rows if r.startswith("| siren gains maj@k over the best baseline"))
    assert "siren - grpo |" in best or "siren - dr_grpo |" in best  # disco_logl scores higher, but is not SIREN's
    assert any(r.startswith("| fewer all-wrong training groups under grpo_rw than grpo") for r in rows)
    assert not any("under disco_logl" in r for r in rows)
    assert any(r.startswith("| DAPO's entropy rises during training") and "supported" in r for r in rows)
    assert any(r.startswith("| Dr. GRPO's entropy falls during training") and "supported" in r for r in rows)


def test_each_method_keeps_its_colour_in_every_figure(tmp_path, repo, monkeypatch):
    """Every figure's lines and bars, read back from the matplotlib artists before
    saving: a method has one colour across the report, its seeds included."""
    from matplotlib.colors import to_hex
    from matplotlib.container import BarContainer

    from rlvr.report import figures

    seen: dict[str, dict[str, set]] = {}
    save = figures._save

    def recording(fig, path):
        for ax in fig.axes:
            for line in ax.get_lines():
                if not line.get_label().startswith("_"):
                    method = line.get_label().split("/seed")[0].split(" (mean of")[0]  # grpo/seed0, grpo (mean of 2 seeds)
                    seen.setdefault(method, {}).setdefault(to_hex(line.get_color()), set()).add(path.name)
            for bars in ax.containers:
                if not isinstance(bars, BarContainer):  # error bars
                    continue
                if bars.get_label() and not bars.get_label().startswith("_"):
                    seen.setdefault(bars.get_label(), {}).setdefault(to_hex(bars[0].get_facecolor()), set()).add(
                        path.name)
                elif bars.orientation == "horizontal":  # the scores figure: a bar per method, named on the y axis
                    names = [t.get_text() for t in ax.get_yticklabels()]
                    for name, bar in zip(names, bars):
                        seen.setdefault(name, {}).setdefault(to_hex(bar.get_facecolor()), set()).add(path.name)
        return save(fig, path)

    monkeypatch.setattr(figures, "_save", recording)
    levels = {"a": 1, "b": 2}
    runs = [Run("base"), Run("grpo", 0), Run("grpo", 1), Run("disco_logl", 0)]
    for run, correct in zip(runs, ({"a": 1, "b": 0, "c": 0}, {"a": 2, "b": 0, "c": 1}, {"a": 2, "b": 1, "c": 0},
                                   {"a": 2, "b": 1, "c": 1})):
        write_eval(tmp_path, run, correct, levels=levels)
    build_report(runs, tmp_path, tmp_path / "reports")
    drawn = {name: files for name, colours in seen.items() for files in colours.values()}
    assert {"base", "grpo", "disco_logl"} <= set(seen)
    assert all(len(colours) == 1 for colours in seen.values()), seen
    assert len({next(iter(c)) for c in seen.values()}) == len(seen)  # and no two methods share one
    assert len(drawn["grpo"]) >= 4  # in the scores, training, difficulty and pass@k figures at least
    # and the report says which is which, by name (MLflow's own colours are per browser)
    from rlvr.runs import COLOR_NAMES

    md = (tmp_path / "reports/results.md").read_text()
    named = ", ".join(f"{m} {COLOR_NAMES[next(iter(seen[m]))]}" for m in ("base", "grpo", "disco_logl"))
    assert f"Each method keeps one colour in every figure: {named}." in md


def write_samples(root: Path, run: Run, answers: dict[str, list[tuple[str, bool]]], problem=lambda q: f"Compute {q}."):
    """samples.jsonl beside a run's evaluation: per problem id, its (extracted answer, correct) samples."""
    d = root / run.eval_dir
    rows = [{"benchmark": b, "id": q, "sample": j, "problem": problem(q), "gold": "8", "response": text,
             "extracted": text, "correct": ok} for b, qs in BENCH.items() for q in qs
            for j, (text, ok) in enumerate(answers.get(q, []))]
    (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_planted_reward_hack_is_flagged_in_the_summary(tmp_path, repo):
    """grpo's rewarded answers restate the question ("7 + 1" for gold 8, as the old
    default's grader allowed); disco_logl's are the gold. Only grpo is flagged."""
    global BENCH
    many = {"arithmetic": [f"q{i}" for i in range(30)], "math500": ["c"]}
    old, BENCH = BENCH, many
    try:
        for run in RUNS:
            write_eval(tmp_path, run, {q: 2 if run.trained else 0 for qs in many.values() for q in qs})
        write_samples(tmp_path, RUNS[1], {q: [("7 + 1", True), ("8", True)] if i % 4 == 0 else [("7 + 1", True)] * 2
                                          for i, q in enumerate(many["arithmetic"])}, problem=lambda q: "Compute 7 + 1.")
        write_samples(tmp_path, RUNS[2], {q: [("8", True), ("9", False)] for q in many["arithmetic"]})
        build_report(RUNS, tmp_path, tmp_path / "reports")
    finally:
        BENCH = old
    md = (tmp_path / "reports/results.md").read_text()
    summary = md.split("## Summary")[1].split("\n## ")[0]
    assert "**Possible reward hack**: grpo on arithmetic (13% of 60 rewarded answers are the gold)" in summary
    assert "disco_logl" not in summary.split("Possible reward hack")[1].split("\n")[0]
    audit = md.split("## Reward-hack audit")[1].split("\n## ")[0]
    assert "| grpo | arithmetic | 60 | 0.13 | 0.00 | 0.00 | 0.87 | **flagged** |" in audit
    assert "| disco_logl | arithmetic | 30 | 1.00 | 0.00 | 0.00 | 0.00 |  |" in audit


def test_too_few_rewarded_answers_are_not_flagged(tmp_path, repo):
    for run in RUNS:
        write_eval(tmp_path, run, {"a": 1, "b": 0, "c": 0})
    write_samples(tmp_path, RUNS[1], {"a": [("7 + 1", True), ("7 + 1", False)]})
    build_report(RUNS, tmp_path, tmp_path / "reports")
    md = (tmp_path / "reports/results.md").read_text()
    assert "Possible reward hack" not in md
    assert "| grpo | arithmetic | 1 | 0.00 | 0.00 | 1.00 | 0.00 |  |" in md  # an expression, not copied here


def test_mlflow_draws_each_training_in_its_report_colour(repo):
    """The train stage tags its MLflow run `mlflow.runColor` with the colour the report
    draws its method in (MLflow 3.17's runs table and charts read that tag)."""
    from rlvr.runs import COLOR_NAMES, run_color
    from rlvr.settings.load import load_params

    params = load_params(repo / "params.yaml")  # the report's models: base, grpo, disco_logl, siren
    assert [COLOR_NAMES[run_color(params, m)] for m in ("grpo", "disco_logl", "siren")] == ["orange", "green", "red"]


def test_the_papers_protocol_reports_the_best_snapshot_on_the_test_sets_beside_ours(tmp_path):
    """Three snapshots of the protocol; the one best on the test sets (step 4:
    mean 0.75) is the paper's column, marked optimistic, beside the best on
    validation (step 2: 0.25) and the final model (step 6: 0.5)."""
    write_eval(tmp_path, RUNS[0], {"a": 0, "b": 0, "c": 0})
    write_eval(tmp_path, RUNS[1], {"a": 1, "b": 1, "c": 1})
    steps = {"2": ({"best": True, "protocol": True, "validation": 0.75}, [[0, False], [1, False], [0, False]]),
             "4": ({"best": False, "protocol": True, "validation": 0.5}, [[2, True], [0, False], [2, True]]),
             "6": ({"best": False, "protocol": True, "validation": 0.5}, [[1, False], [1, False], [1, False]])}
    by_step = {"settings": "x", "steps": {s: {"id": f"h-{s}", **e, "problems": p} for s, (e, p) in steps.items()}}
    (tmp_path / RUNS[1].eval_dir / "by_step.json").write_text(json.dumps(by_step))
    build_report(RUNS[:2], tmp_path, tmp_path / "reports")
    md = (tmp_path / "reports/results.md").read_text()
    assert "## Checkpoint selection: the final model and the best on validation, and the paper's protocol" in md
    assert "optimistic: selected on the test sets" in md
    # arithmetic a, b and math500 c; mean over the sets: step 2 (0.25 + 0) / 2, step 4 (0.5 + 1) / 2, step 6 0.5
    assert "| grpo | 3 | 4 | 0.750 [0.500, 1.000] | 0.125 [0.000, 0.250] | 0.500 [0.500, 0.500] |" in md


def test_without_the_protocol_no_test_selected_column(tmp_path):
    write_eval(tmp_path, RUNS[0], {"a": 0, "b": 0, "c": 0})
    write_eval(tmp_path, RUNS[1], {"a": 1, "b": 1, "c": 1})
    by_step = {"settings": "x", "steps": {"2": {"id": "h-2", "best": True, "validation": 0.5,
                                                "problems": [[1, False], [1, False], [1, False]]}}}
    (tmp_path / RUNS[1].eval_dir / "by_step.json").write_text(json.dumps(by_step))
    build_report(RUNS[:2], tmp_path, tmp_path / "reports")
    md = (tmp_path / "reports/results.md").read_text()
    assert "Checkpoint selection" in md and "paper's protocol" not in md


def test_the_new_claim_rows_by_hand(tmp_path, repo):
    """DisCO's reward still rising where GRPO's saturated, the difficulty bias
    on the training batches, SIREN's validation pass@k kept, the coefficient
    sweep's two directions and DisCO (8k) beside DeepScaleR's 24k/32k row,
    each with where the paper states it."""
    from rlvr.report.claims import all_claim_rows
    from rlvr.report.inputs import load_results

    runs = [Run("base"), Run("grpo", 0), Run("disco_logl", 0), Run("grpo_rw", 0), Run("siren", 0),
            Run("entropy_reg_small", 0), Run("entropy_reg_large", 0), Run("deepscaler_preview_32k", external=True)]
    for run in runs:
        write_eval(tmp_path, run, {"a": 1, "b": 1, "c": 1})
    six = range(1, 7)
    write_steps(tmp_path, runs[1], [0.1, 0.3, 0.5, 0.5, 0.5, 0.5])  # saturated from step 3
    write_steps(tmp_path, runs[2], [0.1 * i for i in six])  # rising 0.1 a step throughout
    write_steps(tmp_path, runs[3], [0.1] * 6, extra={"all_wrong_groups": lambda i: 0.2})  # grpo's: 0.5 - 0.05 i
    write_steps(tmp_path, runs[4], [0.1] * 6, extra={"val_pass@k": lambda i: 0.5})
    write_steps(tmp_path, runs[5], [0.1] * 6, entropy_slope=-0.1)
    write_steps(tmp_path, runs[6], [0.1] * 6, entropy_slope=0.05)
    objectives = {"grpo": "grpo", "disco_logl": "disco", "grpo_rw": "grpo_rw", "siren": "siren",
                  "entropy_reg_small": "entropy_reg", "entropy_reg_large": "entropy_reg"}
    paper = yaml.safe_load((repo / "data/vendor/paper_results.yaml").read_text())
    rows = {r[0]: r for r in all_claim_rows(load_results(tmp_path, runs), objectives, 2, paper["1.5b"])}
    # second half (steps 4-6): DisCO's slope 0.1, GRPO's 0: exact lines
    rise = rows["disco_logl's training reward keeps rising where grpo's saturates"]
    assert rise[2] == "+0.1 [+0.1, +0.1]" and rise[4].startswith("supported") and "Fig. 2" in rise[5]
    # all-wrong shares per step: grpo 0.45 .. 0.2, grpo_rw 0.2: paired differences 0.25 .. 0, mean 0.125
    bias = rows["fewer all-wrong training groups under grpo_rw than grpo"]
    assert bias[2].startswith("+0.125 [") and bias[4].startswith("supported") and "solve_none" in bias[5]
    # validation pass@k flat: slope 0, above the floor -0.2 x 0.5 / 5 steps = -0.02
    kept = rows["siren keeps its validation pass@k through training"]
    assert kept[2] == "+0 [+0, +0]" and "above -0.02" in kept[1] and kept[4].startswith("supported")
    assert "the paper states none" in kept[1] and "abstract" in kept[5]
    # the sweep: each coefficient's own direction, no row crossing them
    small = rows["naive entropy regularization with a small coefficient (entropy_reg_small)'s entropy falls "
                 "during training"]
    large = rows["naive entropy regularization with a large coefficient (entropy_reg_large): entropy rises"]
    assert small[4].startswith("supported") and large[4].startswith("supported")
    assert not any("entropy_reg_small" in r[0] and "rises" in r[0] for r in rows.values())
    # DeepScaleR evaluated at 32k (its own eval: in the recipe), the paper's 24k/32k row: DisCO log-L 0.533 - 0.525
    dsr = rows["disco_logl (8k) on par with or above deepscaler_preview_32k (24k training, 32k evaluation)"]
    assert dsr[3].startswith("+0.008 (")


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


def test_band_and_floor_verdicts_at_their_edges():
    from rlvr.report.claim_stats import band_verdict, floor_verdict

    assert band_verdict(-0.1, 0.1, 0.1) == "supported" and band_verdict(-0.2, 0.0, 0.1) == "inconclusive"
    assert band_verdict(0.11, 0.3, 0.1) == "contradicted" and band_verdict(-0.3, -0.11, 0.1) == "contradicted"
    assert floor_verdict(-0.1, 5.0, 0.1) == "supported" and floor_verdict(-0.2, 0.0, 0.1) == "inconclusive"
    assert floor_verdict(-0.5, -0.11, 0.1) == "contradicted"
    assert floor_verdict(float("nan"), float("nan"), 0.1) == "inconclusive (too few points)"


def test_a_claim_on_a_column_never_logged_has_no_row(tmp_path, repo):
    """Without validation (eval_every 0) no step logs val_pass@k: SIREN's
    validation claims are left out, not shown as nan."""
    from rlvr.report.claims import all_claim_rows
    from rlvr.report.inputs import load_results

    runs = [Run("base"), Run("grpo", 0), Run("siren", 0)]
    for run in runs:
        write_eval(tmp_path, run, {"a": 1, "b": 1, "c": 1})
    rows = all_claim_rows(load_results(tmp_path, runs), {"grpo": "grpo", "siren": "siren"}, 2)
    assert rows and not any("validation" in r[0] for r in rows)
