"""Checkpoint selection: the final model, the best on validation, and the paper's protocol."""

import json

from report_helpers import RUNS, write_eval

from rlvr.report import build_report


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

