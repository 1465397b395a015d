"""Starting ranks: on other nodes, the environment DeepSpeed's multi-node
runner takes there, through the file it reads (DS_ENV_FILE); on any CPU
machine, a rank joins its job without building anything."""

import os
import socket
import subprocess
import sys

import pytest

from rlvr.training.launch import forwarded_env, write_env_file


def test_forwarded_env_keeps_what_the_ranks_need_and_the_users_own_file(tmp_path):
    user = tmp_path / ".deepspeed_env"
    user.write_text("NCCL_IB_DISABLE=1\n# a comment\n")
    env = {"HF_HOME": "/cache/hf", "VLLM_USE_V1": "1", "MLFLOW_TRACKING_URI": "sqlite:////x/mlflow.db",
           "OMP_NUM_THREADS": "8", "GLOO_SOCKET_IFNAME": "eth0", "DVC_ROOT": "/repo", "HOME": "/root",
           "CUDA_VISIBLE_DEVICES": "0,1", "TRANSFORMERS_OFFLINE": "1", "MULTI": "a\nb", "HF_BAD": "a\nb"}
    lines = forwarded_env(env, [user, tmp_path / "missing"])
    assert lines[0] == "NCCL_IB_DISABLE=1"
    assert {"HF_HOME=/cache/hf", "VLLM_USE_V1=1", "OMP_NUM_THREADS=8", "GLOO_SOCKET_IFNAME=eth0", "DVC_ROOT=/repo",
            "TRANSFORMERS_OFFLINE=1", "MLFLOW_TRACKING_URI=sqlite:////x/mlflow.db"} <= set(lines)
    # the launcher sets devices per node; HOME is the remote user's; multi-line values cannot travel
    assert not any(line.startswith(("CUDA_VISIBLE_DEVICES", "HOME", "MULTI", "HF_BAD")) for line in lines)


def test_deepspeeds_runner_reads_the_written_file(tmp_path, monkeypatch):
    """The runner joins its search paths with DS_ENV_FILE: an absolute path
    stays itself, so the runner exports exactly our lines."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HOME", "/cache/hf")
    monkeypatch.setenv("DS_ENV_FILE", "")  # restored after the test: write_env_file sets it
    path = write_env_file(tmp_path / "runs" / "launcher.env")
    assert os.environ["DS_ENV_FILE"] == str(path)
    code = ("import os; from deepspeed.launcher import runner as r; "
            "from deepspeed.launcher.multinode_runner import PDSHRunner\n"
            "class A: user_args = []; user_script = 's'; launcher_args = ''\n"
            "p = PDSHRunner(A(), 'x')\n"
            "for d in r.DEEPSPEED_ENVIRONMENT_PATHS:\n"
            "    f = os.path.join(d, r.DEEPSPEED_ENVIRONMENT_NAME)\n"
            "    if os.path.isfile(f):\n"
            "        [p.add_export(*l.split('=', 1)) for l in open(f).readlines()]\n"
            "print(p.exports['HF_HOME'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "/cache/hf"


JOIN = "from rlvr import distributed; r = distributed.init(); print('joined', r.rank, r.world)"
# a process that never called distributed.init (a dry run): deepspeed.initialize starts the backend itself
ENGINE = """
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
from rlvr.settings.train import TrainParams
from rlvr.training.deepspeed_engine import policy_engines
LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1)).save_pretrained(sys.argv[1])
t = TrainParams(lr=1e-3, zero_stage=0, bf16=False)
engine, _ = policy_engines(sys.argv[1], t, reference=False, world=1, device=torch.device("cpu"))
print('joined', torch.distributed.get_rank(), torch.distributed.get_world_size())
"""


@pytest.mark.parametrize("code", [JOIN, pytest.param(ENGINE, marks=pytest.mark.slow)],
                         ids=["distributed.init", "deepspeed.initialize"])
def test_joining_a_job_on_the_cpu_compiles_nothing_and_survives_a_stale_build_lock(tmp_path, code):
    """A run killed while DeepSpeed JIT-compiled its CPU shared-memory op left
    torch's build lock behind; every later start of DeepSpeed's communication
    backend on that machine waited on it forever (how a CI run hung). Neither
    way in builds that op now: with the lock planted both return at once."""
    ext = tmp_path / "torch_extensions"
    lock = ext / "deepspeed_shm_comm" / "lock"  # torch.utils.cpp_extension._get_build_directory
    lock.parent.mkdir(parents=True)
    lock.touch()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": port, "TORCH_EXTENSIONS_DIR": str(ext)}  # a job of one
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "model")], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "joined 0 1" in done.stdout
    assert [p.name for p in lock.parent.iterdir()] == ["lock"]  # nothing was built beside the stale lock
