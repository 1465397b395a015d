"""Data parallelism on 2 CPU ranks: the real DeepSpeed launcher, gloo, vLLM and
DeepSpeed on every rank, the tiny random model."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from dist_worker import METHODS
from helpers import REPO, clean_env, copy_repo

pytestmark = pytest.mark.slow

WORKER = str(Path(__file__).parent / "dist_worker.py")


def launch(world: int, args: list[str], port: int, **kw) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", str(world), "--master_port", str(port),
           "--no_local_rank", *args]
    env = clean_env(PYTHONPATH=str(Path(__file__).parent))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)


@pytest.fixture(scope="module")
def one_step(tmp_path_factory, tiny_model):
    """The same fixed rollouts through one update step on 1 rank and on 2."""
    out = tmp_path_factory.mktemp("dist")
    for world, port in ((1, 29611), (2, 29612)):
        done = launch(world, [WORKER, "step", "--model", str(tiny_model), "--out", str(out / f"w{world}"),
                              "--repo", str(REPO)], port, timeout=1500)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out


@pytest.mark.parametrize("name", list(METHODS))
def test_two_ranks_make_the_one_rank_update(one_step, tiny_model, name):
    """2 ranks x B/2 questions = 1 rank x B questions, for every registered
    objective: same weights, same metrics. For an objective whose loss adds up
    over any cut (grpo, dr_grpo, dapo, ...) a mini-batch is one question, so
    the 2 ranks share its responses, and cut their halves into token-budget
    calls of one or two responses while 1 rank makes one call per group
    (dist_worker): the mini-batch totals make the cut irrelevant.

    Tolerance: the two updates differ by less than 1e-3 of the update itself
    (float32; gradients are summed in another order across ranks and calls)
    and by at most 1e-5 on any weight, a tenth of the lr: Adam divides by
    sqrt(v), so where a weight's gradient is near 0 another summation order
    moves its step by a visible part of the lr (3.6e-6 seen with token bins)."""
    from transformers import AutoModelForCausalLM

    start = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    w0 = torch.cat([p.detach().flatten() for p in start.parameters()])
    one = torch.load(one_step / "w1" / f"{name}_w1.pt")
    two = torch.load(one_step / "w2" / f"{name}_w2.pt")
    update, diff = (one["weights"] - w0).norm(), one["weights"] - two["weights"]
    assert update > 0
    assert diff.norm() / update < 1e-3 and diff.abs().max().item() < 1e-5
    for key in ("loss", "kl", "reward_mean", "accuracy", "entropy", "topp_entropy", "response_length",
                "zero_variance_groups"):
        # abs 1e-6: KL is a mean of differences of near-equal log-probs, summed in another order over ranks
        assert two["row"][key] == pytest.approx(one["row"][key], rel=1e-4, abs=1e-6), key
    assert one["row"]["kl"] != 0  # the second mini-batch is off-policy: the test sees the old-logprob pass
    if name == "siren":
        assert two["row"]["entropy_anchor"] == pytest.approx(one["row"]["entropy_anchor"], rel=1e-5)


def test_ranks_sample_disjoint_questions_and_their_own_responses(one_step):
    """One real rollout step of the two-rank job (dist_worker, after its updates)."""
    r0, r1 = (json.loads((one_step / "w2" / f"sample_rank{r}.json").read_text()) for r in (0, 1))
    assert len(r0["ids"]) == len(r1["ids"]) == 2 and not set(r0["ids"]) & set(r1["ids"])
    assert r0["responses"] != r1["responses"]
    assert r0["executor"] == r1["executor"] == "ExecutorWithExternalLauncher"  # the executor of a GPU node


def _spawned_pids(log: str) -> list[int]:
    return [int(p) for p in re.findall(r"process (\d+) spawned with command", log)]


def test_a_killed_rank_ends_the_job_and_the_rerun_resumes(tmp_path, tiny_model):
    root = copy_repo(tmp_path / "repo")
    raw = yaml.safe_load((root / "params.yaml").read_text())
    raw["data"]["arithmetic"].update({"levels": [1, 2], "n_train": 40, "n_test_per_level": 2,
                                       "n_validation_per_level": 0})
    raw["engine"].update({"kv_cache_gib": 1, "max_model_len": 512})
    for section in ("eval", "validation"):  # the suite's budget: the default's own 80 tokens cost 2.5x the time here
        raw[section]["max_new_tokens"] = 32
    raw["launcher"].update({"kind": "deepspeed", "procs_per_node": 2, "master_port": 29614, "timeout_s": 60})
    raw["train"].update({"steps": 4, "questions_per_step": 2, "responses_per_question": 2, "mini_batch_questions": 2,
                         "micro_batch_questions": 1, "max_response_tokens": 16, "checkpoint_every": 1})
    raw["methods"] = {"grpo": {"objective": "grpo"}}
    raw.pop("sweep", None)  # the default's sweep names its methods
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    env = clean_env(MLFLOW_TRACKING_URI=f"sqlite:///{root}/mlflow.db")
    subprocess.run([sys.executable, "stages/prepare_data.py"], cwd=root, env=env, check=True, capture_output=True)
    cmd = [sys.executable, "stages/train.py", "--method", "grpo", "--model", str(tiny_model)]
    state_file = root / "runs/grpo/seed0/checkpoint/trainer_state.json"
    log = tmp_path / "launch.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=f, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if state_file.exists() and json.loads(state_file.read_text())["step"] >= 2:
            break
        time.sleep(0.2)
    assert proc.poll() is None, log.read_text()[-3000:]
    pids = _spawned_pids(log.read_text())
    assert len(pids) == 2
    killed_at = time.time()
    os.kill(pids[1], signal.SIGKILL)  # rank 1
    code = proc.wait(timeout=180)
    assert code != 0 and time.time() - killed_at < 120, log.read_text()[-3000:]
    done_at = json.loads(state_file.read_text())["step"]
    assert 2 <= done_at < 4
    again = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"resumed from step {done_at}" in again.stdout
    with open(root / "reports/train/grpo/seed0/steps.csv") as f:
        assert [int(line.split(",")[0]) for line in f.read().splitlines()[1:]] == [1, 2, 3, 4]
    state = json.loads(state_file.read_text())
    assert state["step"] == 4 and state["world"] == 2 and state["data_position"] == 4 * 2  # steps x B, global
    assert (root / "runs/grpo/seed0/checkpoint/rng_rank1.pt").exists()  # each rank's generators checkpointed
