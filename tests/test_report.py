"""The report from small fixed train/eval outputs: tables carry exactly the inputs."""

import csv
import json
from pathlib import Path

import pytest
import yaml

from rlvr.report import build_report, gains, markdown, per_question_accuracy, table


def write_eval(root: Path, run: str, arith: float, math: float, levels: dict, samples: list[tuple]):
    d = root / "eval" / run
    d.mkdir(parents=True)
    bench = lambda v, extra=None: {"avg@2": v, "pass@1": v, "pass@2": min(1.0, 2 * v), "maj@2": v,  # noqa: E731
                                   "n_problems": 2.0, **(extra or {})}
    metrics = {"k": 2, "mean": {"avg@2": (arith + math) / 2, "pass@2": min(1, 2 * arith) / 2 + min(1, 2 * math) / 2,
                                "maj@2": (arith + math) / 2},
               "benchmarks": {"arithmetic": bench(arith, {"levels": {k: bench(v) for k, v in levels.items()}}),
                              "math500": bench(math)}}
    (d / "metrics.json").write_text(json.dumps(metrics))
    with open(d / "samples.jsonl", "w") as f:
        for qid, correct in samples:
            f.write(json.dumps({"benchmark": "arithmetic", "id": qid, "correct": correct}) + "\n")


def write_steps(root: Path, method: str, rewards: list[float]):
    d = root / "runs" / method
    d.mkdir(parents=True)
    with open(d / "steps.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["step", "reward_mean", "entropy", "kl", "response_length",
                                          "topp_entropy", "zero_variance_groups"])
        w.writeheader()
        for i, r in enumerate(rewards, start=1):
            w.writerow({"step": i, "reward_mean": r, "entropy": 1.0 / i, "kl": 1e-4 * i, "response_length": 50 + i,
                        "topp_entropy": 0.5, "zero_variance_groups": 0.5})


@pytest.fixture
def report(tmp_path, repo):
    write_eval(tmp_path, "base", 0.25, 0.0, {"1": 0.5, "2": 0.0},
               [("a", True), ("a", False), ("b", False), ("b", False)])
    write_eval(tmp_path, "grpo", 0.5, 0.1, {"1": 1.0, "2": 0.0},
               [("a", True), ("a", True), ("b", False), ("b", False)])
    write_eval(tmp_path, "disco_logl", 0.75, 0.2, {"1": 1.0, "2": 0.5},
               [("a", True), ("a", True), ("b", True), ("b", False)])
    write_steps(tmp_path, "grpo", [0.1, 0.2, 0.3])
    write_steps(tmp_path, "disco_logl", [0.1, 0.3, 0.5])
    out = build_report(["base", "grpo", "disco_logl", "missing"], ["grpo", "disco_logl"], tmp_path / "eval",
                       tmp_path / "runs", tmp_path / "reports", repo / "data/vendor/paper_results.yaml", "1.5b")
    return tmp_path, out


def test_main_table_values_match_inputs(report):
    root, out = report
    t = out["tables"]["avg@2"]
    assert t["header"] == ["method", "arithmetic", "math500", "mean"]
    assert t["rows"] == [["base", 0.25, 0.0, 0.125], ["grpo", 0.5, 0.1, 0.3], ["disco_logl", 0.75, 0.2, 0.475]]
    assert out["runs"] == ["base", "grpo", "disco_logl"]  # a run without outputs is left out


def test_markdown_marks_best_and_shows_paper_rows(report, repo):
    root, _ = report
    md = (root / "reports/results.md").read_text()
    assert "| disco_logl | **0.750** | **0.200** | **0.475** |" in md
    paper = yaml.safe_load((repo / "data/vendor/paper_results.yaml").read_text())
    disco_row = next(r for r in paper["1.5b"]["rows"] if r["method"] == "disco_logl")
    assert f"disco_logl (paper, {disco_row['mrl']})" in md
    assert "gain over base" in md and "| disco_logl | +0.500 | +0.200 | +0.350 |" in md
    assert "| disco_logl | +0.250 | +0.100 | +0.175 |" in md  # gain over grpo
    assert "| L1 | L2 |" in md.replace("| method | L1 | L2 |", "| L1 | L2 |")


def test_difficulty_bias_shares(report):
    root, _ = report
    md = (root / "reports/results.md").read_text()
    # base: a at 50%, b at 0% -> 50% at 0%; grpo: a 100%, b 0%; disco: a 100%, b 50%
    assert "| base | 50.0% | 0.0% |" in md
    assert "| grpo | 50.0% | 50.0% |" in md
    assert "| disco_logl | 0.0% | 50.0% |" in md
    acc = per_question_accuracy(root / "eval/disco_logl/samples.jsonl")
    assert acc == {("arithmetic", "a"): 1.0, ("arithmetic", "b"): 0.5}


def test_figures_and_self_contained_html(report):
    root, out = report
    names = sorted(Path(f).name for f in out["figures"])
    assert names == ["difficulty_bias.png", "entropy_groups.png", "kl_length.png", "training_dynamics.png"]
    for f in out["figures"]:
        assert Path(f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and Path(f).stat().st_size > 10_000
    html = (root / "reports/index.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and "<table>" in html and "<b>0.750</b>" in html


def test_gains_and_markdown_helpers():
    rows = [["base", 0.1, None], ["grpo", 0.3, 0.2]]
    assert gains(rows, "base") == [["grpo", pytest.approx(0.2), None]]
    assert gains(rows, "dapo") is None
    assert "–" in markdown(["m", "a", "b"], rows)


def test_no_evaluations_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the evaluate stages first"):
        build_report(["base"], [], tmp_path, tmp_path, tmp_path / "out")


def test_table_reads_metrics(report):
    root, _ = report
    evals = {r: json.loads((root / "eval" / r / "metrics.json").read_text()) for r in ("base", "grpo")}
    header, rows = table(evals, "maj@2")
    assert rows[1] == ["grpo", 0.5, 0.1, 0.3]
