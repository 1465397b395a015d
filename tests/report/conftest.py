"""The report built once from small fixed outputs (report_helpers), for the tests that read it."""

import pytest
from report_helpers import RUNS, write_eval, write_steps

from rlvr.report import build_report
from rlvr.runs import Run


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

