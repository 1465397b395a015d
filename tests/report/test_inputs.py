"""Reading the runs: per-problem values, and a trained run's step log."""

import pytest
from report_helpers import RUNS, write_eval

from rlvr.report import build_report, per_problem


def test_per_problem_values():
    rows = [{"benchmark": "x", "correct": 1, "k": 4, "majority": False},
            {"benchmark": "x", "correct": 0, "k": 4, "majority": False}]
    assert per_problem(rows, "avg")["x"].tolist() == [0.25, 0.0]
    assert per_problem(rows, "pass")["x"].tolist() == [1.0, 0.0]
    assert per_problem(rows, "maj")["x"].tolist() == [0.0, 0.0]


def test_an_evaluated_training_without_its_step_log_is_an_error(tmp_path, repo):
    write_eval(tmp_path, RUNS[1], {"a": 2, "b": 0, "c": 1})
    steps = tmp_path / RUNS[1].train_dir / "steps.csv"
    steps.write_text(steps.read_text().splitlines()[0] + "\n")  # the header alone
    with pytest.raises(FileNotFoundError, match="steps.csv is empty but its run was evaluated"):
        build_report(RUNS[1:2], tmp_path, tmp_path / "reports")
    steps.unlink()
    with pytest.raises(FileNotFoundError, match="steps.csv is missing"):
        build_report(RUNS[1:2], tmp_path, tmp_path / "reports")

