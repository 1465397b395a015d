"""bench/gpu_check.sh --cpu: the GPU check's code paths at small sizes, so the
script a GPU session runs does not rot between GPU sessions."""

import json
import subprocess
import sys

import pytest
from helpers import REPO

from rlvr.objectives.registry import objectives

pytestmark = pytest.mark.slow


def test_gpu_check_runs_on_the_cpu_and_every_check_passes():
    out = subprocess.run(["bash", "bench/gpu_check.sh", "--cpu"], cwd=REPO, capture_output=True, text=True,
                         timeout=900, env={**__import__("os").environ, "PYTHON": sys.executable})
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    checks = {r["check"] for r in rows}
    assert {"env", "grader_pool", "objective_step", "lm_head_numerics", "lm_head", "loss_call", "checkpoint"} <= checks
    assert all(r.get("ok", True) for r in rows), [r for r in rows if not r.get("ok", True)]
    steps = [r for r in rows if r["check"] == "objective_step"]
    # every registered objective, each with a finite loss and moved weights
    assert {r["objective"] for r in steps} == set(objectives())
    numerics = next(r for r in rows if r["check"] == "lm_head_numerics")
    assert numerics["logp_max_diff"] < 1e-4 and numerics["grad_weight_rel"] < 1e-4
    pool = next(r for r in rows if r["check"] == "grader_pool")
    assert pool["graded_right"] == pool["groups"] and pool["worker_imported_torch"] is False
    call = next(r for r in rows if r["check"] == "loss_call")
    assert call["tokens"] < call["rows"] * call["width"]  # left-padded, unequal rows: a real attention mask
