"""A stop asked for by a signal to the whole process group (what Slurm,
Kubernetes, `docker stop` and Ctrl-C send): the training ends within a bound,
checkpointed, with exit status 3 and no process left; its rerun resumes and
ends equal to a run never interrupted, in the same MLflow run.

tests/e2e/signal_probe (on PYTHONPATH) holds the chosen phase of step 2 for a few
seconds, so that the signal lands inside it."""

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import REPO, clean_env, copy_repo

from rlvr.digests import tree_md5

pytestmark = pytest.mark.slow

STEPS = 3
STOP_BOUND_S = 120  # from the signal to the exit, setup excluded (a step on this CPU takes about 15 s)
PROBE = REPO / "tests" / "e2e" / "signal_probe"
CURVE = ("reward_mean", "kl", "loss", "entropy", "val_avg@k", "val_pass@k")


def _repo(tmp_path: Path, ranks: int) -> Path:
    from helpers import tiny_params

    root = copy_repo(tmp_path / "repo")
    raw = tiny_params(root, {"grpo": {"objective": "grpo"}})
    raw["data"]["out_dir"] = "data/prepared"
    raw["train"].update({"steps": STEPS, "checkpoint_every": 100})  # the only checkpoint is the stop's
    if ranks > 1:  # validation at the stop's step and the last: the evaluation's gather over two ranks runs too
        raw["train"]["eval_every"] = 2
        raw["data"]["validation_size"] = 4
    raw["launcher"].update({"kind": "deepspeed" if ranks > 1 else "python", "procs_per_node": ranks,
                            "master_port": 29630 + ranks, "timeout_s": 120})
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    subprocess.run([sys.executable, "stages/prepare_data.py"], cwd=root, check=True, env=_env(root),
                   capture_output=True)
    return root


def _env(root: Path, **extra) -> dict:
    return clean_env(MLFLOW_TRACKING_URI=f"sqlite:///{root}/mlflow.db", **extra)


def _train(root: Path, model: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "stages/train.py", "--method", "grpo", "--model", str(model)], cwd=root,
                          env=_env(root), capture_output=True, text=True, timeout=900, **kw)


def _outcome(root: Path) -> tuple[str, list[dict]]:
    """The final model's digest and the step log's curves."""
    with open(root / "reports/train/grpo/seed0/steps.csv") as f:
        rows = [{k: float(r[k]) for k in ("step", *CURVE) if r.get(k) not in (None, "")} for r in csv.DictReader(f)]
    return tree_md5(root / "models/grpo/seed0"), rows


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_model):
    done = {}

    def outcome(ranks: int):
        if ranks not in done:
            root = _repo(tmp_path_factory.mktemp(f"whole{ranks}"), ranks)
            out = _train(root, tiny_model)
            assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
            done[ranks] = _outcome(root)
        return done[ranks]

    return outcome


def _left_running(root: Path) -> list[str]:
    """Processes still working in the repository: the stage, a launcher, a rank
    (in a session of its own under the launcher) or a grading worker."""
    import psutil

    left = []
    for p in psutil.process_iter(["cwd", "cmdline"]):
        if p.info["cwd"] and Path(p.info["cwd"]) == root and p.pid != os.getpid():
            left.append(" ".join(p.info["cmdline"] or [])[:120])
    return left


# Two runs cover both signals, both phases a stop meets differently (a dropped step, a finished one) and
# both launchers: SIGTERM in grading on one rank, SIGINT in the update on two.
@pytest.mark.parametrize("sig,phase,ranks", [(signal.SIGTERM, "grading", 1), (signal.SIGINT, "update", 2)])
def test_a_signal_to_the_process_group_checkpoints_and_the_rerun_ends_equal(tmp_path, tiny_model, uninterrupted,
                                                                             sig, phase, ranks):
    root = _repo(tmp_path, ranks)
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    env = _env(root, PYTHONPATH=f"{PROBE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               RLVR_PROBE=f"{phase}:2:{probe_dir}")
    log = tmp_path / "train.log"
    with open(log, "w") as f:  # its own session: the group holds the stage, its ranks and its grading workers
        proc = subprocess.Popen([sys.executable, "stages/train.py", "--method", "grpo", "--model", str(tiny_model)],
                                cwd=root, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and len(list(probe_dir.iterdir())) < ranks:
        time.sleep(0.1)
    assert proc.poll() is None, log.read_text()[-3000:]
    signalled = time.time()
    os.killpg(proc.pid, sig)
    status = proc.wait(timeout=STOP_BOUND_S)
    took = time.time() - signalled
    text = log.read_text()
    assert status == 3, text[-3000:]
    time.sleep(3)  # the grading workers see their parent gone at once; give the kernel a moment
    assert not _left_running(root), _left_running(root)
    stopped = json.loads((root / "runs/grpo/seed0/checkpoint/trainer_state.json").read_text())["step"]
    # In the rollout or grading, step 2 is dropped before its update; in the update, it is finished first.
    assert stopped == (1 if phase == "grading" else 2), text[-3000:]
    assert f"stopped by {signal.Signals(sig).name}" in text
    print(f"{signal.Signals(sig).name} to the group during {phase} of step 2 on {ranks} rank(s): exit {status} "
          f"after {took:.1f} s, checkpoint at step {stopped}")

    again = _train(root, tiny_model)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert f"resumed from step {stopped}" in again.stdout
    model_md5, curves = _outcome(root)
    whole_md5, whole_curves = uninterrupted(ranks)
    assert curves == whole_curves
    assert model_md5 == whole_md5  # the resumed run ends where the uninterrupted one does
    with sqlite3.connect(root / "mlflow.db") as con:  # one MLflow run holds the training's every step
        runs = con.execute("SELECT run_uuid, status FROM runs WHERE name = 'train@grpo/seed0'").fetchall()
        assert len(runs) == 1 and runs[0][1] == "FINISHED", runs
        steps = [s for (s,) in con.execute("SELECT step FROM metrics WHERE run_uuid = ? AND key = 'train/reward_mean'",
                                           (runs[0][0],))]
    assert sorted(set(steps)) == list(range(1, STEPS + 1))
