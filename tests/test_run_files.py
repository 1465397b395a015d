"""The step log never holds a step twice."""

import pytest

from rlvr.run_files import StepLog


def test_the_step_log_refuses_a_step_it_holds(tmp_path):
    log = StepLog(tmp_path / "steps.csv")
    log.append({"step": 1, "loss": 0.5})
    log.append({"step": 2, "loss": 0.4})
    with pytest.raises(RuntimeError, match="already holds step 2: step 2 would repeat"):
        log.append({"step": 2, "loss": 0.3})
    log.truncate(1)  # a resume from step 1's checkpoint
    log.append({"step": 2, "loss": 0.3})
    assert [r["step"] for r in log.history()] == [1, 2] and log.history()[1]["loss"] == 0.3
