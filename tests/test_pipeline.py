"""End to end: the real DAG (data -> model -> vLLM evaluate -> MLflow) on tiny params."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import copy_repo

pytestmark = pytest.mark.slow

TINY = {
    "data": {"arithmetic": {"levels": [1, 2], "n_train": 20, "n_test_per_level": 3}, "benchmarks": ["math500"]},
    "engine": {"kv_cache_gib": 1, "max_model_len": 512},
    "eval": {"k": 2, "max_new_tokens": 48, "limits": {"math500": 2}},
    "tracking": {"log_samples": 5},
    "train": {"steps": 1, "questions_per_step": 2, "responses_per_question": 2, "mini_batch_questions": 2,
              "micro_batch_questions": 1, "max_response_tokens": 16, "checkpoint_every": 1},
}


def deep_update(d: dict, u: dict) -> dict:
    for k, v in u.items():
        d[k] = deep_update(d.get(k, {}), v) if isinstance(v, dict) else v
    return d


def run(cmd, cwd, **kw):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "MLFLOW_TRACKING_URI": f"sqlite:///{cwd}/mlflow.db"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = copy_repo(tmp_path_factory.mktemp("repo"))
    params = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump(deep_update(params, TINY)))
    out = run([sys.executable, "-m", "dvc", "repro"], root, timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return root, out


def test_repro_writes_metrics_per_level(pipeline):
    root, out = pipeline
    m = json.loads((root / "reports/eval/base/metrics.json").read_text())
    arith = m["benchmarks"]["arithmetic"]
    assert set(arith["levels"]) == {"1", "2"}
    assert arith["n_problems"] == 6 and m["benchmarks"]["math500"]["n_problems"] == 2
    for key in ("avg@2", "pass@1", "pass@2", "maj@2"):
        assert 0.0 <= arith[key] <= 1.0
    assert arith["pass@2"] >= arith["pass@1"] == pytest.approx(arith["avg@2"])
    rows = [json.loads(line) for line in (root / "reports/eval/base/samples.jsonl").read_text().splitlines()]
    assert len(rows) == (6 + 2) * 2
    assert {"id", "response", "extracted", "correct"} <= set(rows[0])
    # the per-sample rows and the summary agree
    ar = [r for r in rows if r["benchmark"] == "arithmetic"]
    assert arith["avg@2"] == pytest.approx(sum(r["correct"] for r in ar) / len(ar))
    assert "[evaluate@base] done in" in out.stdout and "[train@grpo] done in" in out.stdout


def test_mlflow_run_tagged_with_metrics(pipeline):
    root, _ = pipeline
    db = sqlite3.connect(root / "mlflow.db")
    runs = dict((name, uuid) for uuid, name in db.execute("select run_uuid, name from runs").fetchall())
    assert set(runs) == {"train@grpo", "train@disco_logl", "evaluate@base", "evaluate@grpo",
                         "evaluate@disco_logl", "report"}
    ev = runs["evaluate@base"]
    tags = dict(db.execute("select key, value from tags where run_uuid=?", (ev,)).fetchall())
    assert tags["stage"] == "evaluate@base" and tags["model"] == "base" and len(tags["git_commit"]) == 40
    assert "dvc_exp" in tags
    metrics = dict(db.execute("select key, value from metrics where run_uuid=?", (ev,)).fetchall())
    assert "arithmetic/avg_at_2" in metrics and "mean/pass_at_2" in metrics
    params = dict(db.execute("select key, value from params where run_uuid=?", (ev,)).fetchall())
    assert params["eval.k"] == "2"
    steps = db.execute("select key, step from metrics where run_uuid=? and key='reward_mean'",
                       (runs["train@grpo"],)).fetchall()
    assert steps == [("reward_mean", 1)]
    assert (root / "reports/results.md").read_text().count("| grpo |") >= 3


def test_param_change_reruns_only_evaluation(pipeline):
    root, _ = pipeline
    run(["git", "add", "-A"], root)
    out = run([sys.executable, "-m", "dvc", "repro", "--dry"], root)
    assert "didn't change" in out.stdout and "Running stage" not in out.stdout
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["eval"]["k"] = 1
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    out = run([sys.executable, "-m", "dvc", "status"], root)
    assert "evaluate@base" in out.stdout
    assert "prepare_data" not in out.stdout and "prepare_model" not in out.stdout


def test_bad_params_fail_before_compute(pipeline):
    root, _ = pipeline
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["eval"]["kk"] = 3
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    out = run([sys.executable, "stages/evaluate.py", "--run", "base", "--model", "models/base", "--out", "x"], root)
    assert out.returncode == 2
    assert "unknown key 'eval.kk' (did you mean 'eval.k'?)" in out.stderr
    assert not (root / "x").exists()
