"""MLflow runs in a real sqlite store: one run per training across resumes, runs
a killed process left RUNNING closed, a copied store writing into its copy."""

import shutil
import socket
import subprocess
import sys

import pytest

from rlvr.stopping import TrainingAborted, TrainingStopped
from rlvr.tracking.names import PROCESS_TAG
from rlvr.tracking.tracker import Tracker, end_status


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))  # the pipeline's parent run keys on params.yaml here
    monkeypatch.chdir(tmp_path)
    for leaked in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID"):  # mlflow.set_* export them: undone after each test
        monkeypatch.delenv(leaked, raising=False)
    return tmp_path


def _client(root):
    from mlflow.tracking import MlflowClient

    return MlflowClient(f"sqlite:///{root}/mlflow.db")


def _steps(client, run_id, key="reward_mean"):
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def test_a_resumed_training_continues_its_run(store):
    uri = f"sqlite:///{store}/mlflow.db"
    first = Tracker("train@grpo/seed0", uri=uri, params={"lr": 1e-6}, start=False)
    first.start()
    first.log_metrics({"reward_mean": 0.1}, step=1)
    first.close(end_status(TrainingStopped))
    client = _client(store)
    assert client.get_run(first.run_id).info.status == "KILLED"
    again = Tracker("train@grpo/seed0", uri=uri, params={"lr": 1e-6}, start=False)
    again.start(resume=first.run_id)
    again.log_metrics({"reward_mean": 0.2}, step=2)
    again.close()
    assert again.run_id == first.run_id
    run = client.get_run(first.run_id)
    assert run.info.status == "FINISHED" and _steps(client, first.run_id) == [1, 2]
    assert run.data.params == {"lr": "1e-06"}  # logged once, when the run was made
    unknown = Tracker("train@grpo/seed0", uri=uri, start=False)
    unknown.start(resume="0" * 32)  # a checkpoint naming a run of another store: a new run
    assert unknown.run_id not in (None, first.run_id)
    unknown.close()


def test_a_run_left_running_by_a_dead_process_is_closed_as_killed(store):
    import os

    uri = f"sqlite:///{store}/mlflow.db"
    Tracker("prepare_data", uri=uri).close()  # the experiment
    client = _client(store)
    exp = client.get_experiment_by_name("rlvr").experiment_id
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()

    def running(pid, stage="train@grpo/seed0"):  # a run as a process leaves it: RUNNING, no end time
        run = client.create_run(exp, tags={"stage": stage, "dvc_exp": "workspace", PROCESS_TAG: f"{host}:{pid}"})
        client.log_metric(run.info.run_id, "reward_mean", 0.3, step=7)
        return run.info.run_id

    left, live, other = running(dead.stdout.strip()), running(os.getppid()), running(dead.stdout.strip(), "report")
    Tracker("train@grpo/seed0", uri=uri).close()
    run = client.get_run(left)
    assert run.info.status == "KILLED" and run.info.end_time is not None
    assert "last step 7" in run.data.tags["rlvr.ended"]
    assert client.get_run(live).info.status == "RUNNING"  # its process is alive: maybe a parallel run
    assert client.get_run(other).info.status == "RUNNING"  # another stage's: closed when that stage starts


def test_a_copied_store_writes_its_artifacts_into_the_copy(store, tmp_path_factory):
    original = store / "a"
    original.mkdir()
    t = Tracker("report", uri=f"sqlite:///{original}/mlflow.db")
    (original / "note.txt").write_text("x")
    t.log_artifact(original / "note.txt")
    t.close()
    copy = tmp_path_factory.mktemp("copy")
    shutil.copytree(original, copy, dirs_exist_ok=True)
    shutil.rmtree(original / "mlartifacts")
    t = Tracker("report", uri=f"sqlite:///{copy}/mlflow.db")
    t.log_artifact(copy / "note.txt")
    t.close()
    assert not (original / "mlartifacts").exists()  # nothing written into the original
    client = _client(copy)
    for run in client.search_runs([client.get_experiment_by_name("rlvr").experiment_id]):
        assert run.info.artifact_uri.startswith((copy / "mlartifacts").as_uri()), run.info.artifact_uri
    assert len(list((copy / "mlartifacts").rglob("note.txt"))) == 2  # the copied run's and the new one's


def test_the_status_says_how_the_stage_ended():
    assert end_status(None) == "FINISHED"
    assert end_status(TrainingStopped) == end_status(TrainingAborted) == end_status(KeyboardInterrupt) == "KILLED"
    assert end_status(RuntimeError) == "FAILED"


def test_step_metrics_are_sectioned_and_the_completions_table_logged(store):
    from rlvr.tracking.names import headline_metrics, step_metric_key

    assert [step_metric_key(c) for c in ("reward_mean", "entropy", "response_length", "val_avg@k", "clip_frac")] == [
        "train/reward_mean", "train/entropy", "train/response_length", "val/avg@k", "train details/clip_frac"]
    # MLflow orders sections by code unit: the curves a trainer reads first come first
    assert sorted(["train details", "train", "val", "eval"])[1:] == ["train", "train details", "val"]
    t = Tracker("train@grpo/seed0", uri=f"sqlite:///{store}/mlflow.db")
    t.log_step({"step": 3, "reward_mean": 0.5, "val_avg@k": 0.25},
               [{"step": 3, "problem": "1+1?", "completion": "\\boxed{2}", "reward": 1.0, "correct": True}])
    t.close()
    client = _client(store)
    assert _steps(client, t.run_id, "train/reward_mean") == [3] and _steps(client, t.run_id, "val/avg_at_k") == [3]
    assert [f.path for f in client.list_artifacts(t.run_id, "completions")] == ["completions/step_000003.json"]
    metrics = {"k": 4, "k_per_set": {"aime24": 16}, "mean": {"avg@4": 0.123456, "maj@4": 0.2},
               "benchmarks": {"aime24": {"avg@16": 0.1, "pass@16": 0.5}}}
    assert headline_metrics(metrics) == {"eval mean avg_at_4": 0.1235, "eval mean maj_at_4": 0.2,
                                         "eval aime24 avg_at_16": 0.1, "eval aime24 pass_at_16": 0.5}


KILLED_IN_STEP_7 = """
import os, sys
from rlvr.tracking.tracker import Tracker
t = Tracker("train@grpo/seed0", uri=sys.argv[1], start=False)
t.start()
for step in range(1, 8):
    t.log_step({"step": step, "reward_mean": 0.1 * step, "clip_frac": 0.01 * step, "val_avg@k": 0.5})
t.log_metrics({"system/cpu_utilization_percentage": 50.0}, step=7)
print(t.run_id, flush=True)
os._exit(9)  # as kill -9 in step 7: the run never closed
"""


def test_a_resume_drops_the_steps_the_stopped_attempt_logged_past_its_checkpoint(store):
    """kill -9 in step 7 with the checkpoint at step 5: the resumed run drops steps 6-7 of
    every per-step key (not the system metrics), relogs them, and holds one value per step."""
    uri = f"sqlite:///{store}/mlflow.db"
    dying = subprocess.run([sys.executable, "-c", KILLED_IN_STEP_7, uri], capture_output=True, text=True, cwd=store)
    assert dying.returncode == 9, dying.stderr[-2000:]
    run_id = dying.stdout.strip()
    again = Tracker("train@grpo/seed0", uri=uri, start=False)
    again.start(resume=run_id)
    again.drop_steps_after(5)
    client = _client(store)
    assert _steps(client, run_id, "train/reward_mean") == [1, 2, 3, 4, 5]
    assert _steps(client, run_id, "train details/clip_frac") == [1, 2, 3, 4, 5]
    assert _steps(client, run_id, "system/cpu_utilization_percentage") == [7]  # not a training step
    assert client.get_run(run_id).data.metrics["train/reward_mean"] == pytest.approx(0.5)  # the latest: step 5
    for step in (6, 7):
        again.log_step({"step": step, "reward_mean": 0.2 * step, "clip_frac": 0.0, "val_avg@k": 0.5})
    again.close()
    history = client.get_metric_history(run_id, "train/reward_mean")
    assert sorted(m.step for m in history) == [1, 2, 3, 4, 5, 6, 7]  # one value per step
    assert {m.step: m.value for m in history}[7] == pytest.approx(1.4)


def test_a_finished_trainings_status_survives_a_later_failed_attempt(store):
    uri = f"sqlite:///{store}/mlflow.db"
    done = Tracker("train@grpo/seed0", uri=uri, start=False)
    done.start()
    done.close()
    later = Tracker("train@grpo/seed0", uri=uri, start=False)
    later.start(resume=done.run_id)
    later.close(end_status(RuntimeError))  # a damaged checkpoint, say
    run = _client(store).get_run(done.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["rlvr.later_attempt"].startswith("FAILED ")
    stopped = Tracker("train@grpo/seed1", uri=uri, start=False)  # a run that had not finished keeps its new status
    stopped.start()
    stopped.close(end_status(TrainingStopped))
    resumed = Tracker("train@grpo/seed1", uri=uri, start=False)
    resumed.start(resume=stopped.run_id)
    resumed.close(end_status(RuntimeError))
    assert _client(store).get_run(stopped.run_id).info.status == "FAILED"
