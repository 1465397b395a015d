"""Starting a stage the way `launcher:` says: here, or under the DeepSpeed launcher.

A stage script calls `relaunch(params)` first. With `launcher.kind: deepspeed`
and no rank yet, it checks the machine (GPUs, hostfile), then runs
`deepspeed ... <the same script and arguments>`, which starts one process per
rank; those ranks run the script for real, and the stage exits with the
launcher's status. So dvc.yaml keeps one command per stage and `dvc repro`
trains on every GPU of the node (or nodes).

The launcher runs in a session of its own, and this process passes a stop
signal (SIGTERM, SIGINT) to the ranks alone: DeepSpeed's launcher, signalled,
kills its ranks 30 s later whether they have checkpointed or not, and its
runner, signalled, dies and leaves them running. Each rank watches this
process and ends itself if it is gone (a kill -9 leaves no orphan rank).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from rlvr.schema import ConfigError
from rlvr.settings.sections import LauncherParams


def under_launcher() -> bool:
    return "LOCAL_RANK" in os.environ or "RANK" in os.environ


def hostfile_slots(path: str | Path) -> dict[str, int]:
    """DeepSpeed's hostfile: one 'hostname slots=N' per line; # starts a comment."""
    hosts = {}
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, *rest = line.split()
        slots = [int(r.split("=", 1)[1]) for r in rest if r.startswith("slots=")]
        if not slots:
            raise ConfigError([f"launcher.hostfile {path}: line '{line}' has no 'slots=N'"])
        hosts[name] = slots[0]
    return hosts


def machine_problems(lc: LauncherParams, gpus: int | None = None) -> list[str]:
    """What the machine must offer for `lc` (params.yaml alone cannot tell)."""
    problems = []
    if gpus is None:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus and lc.procs_per_node > gpus:
        problems.append(f"'launcher.procs_per_node' is {lc.procs_per_node} but this node has {gpus} GPU(s); "
                        "one rank per GPU: lower procs_per_node")
    if not gpus and lc.procs_per_node > (os.cpu_count() or 1):
        problems.append(f"'launcher.procs_per_node' is {lc.procs_per_node} CPU ranks on {os.cpu_count()} cores: "
                        "each rank needs a core of its own")
    if lc.hostfile and Path(lc.hostfile).exists():
        hosts = hostfile_slots(lc.hostfile)
        if len(hosts) < lc.nodes:
            problems.append(f"'launcher.nodes' is {lc.nodes} but {lc.hostfile} lists {len(hosts)} host(s)")
        short = [h for h, n in list(hosts.items())[: lc.nodes] if n < lc.procs_per_node]
        if short:
            problems.append(f"{lc.hostfile}: host(s) {', '.join(short)} have fewer than "
                            f"procs_per_node = {lc.procs_per_node} slots")
    return problems


def deepspeed_command(lc: LauncherParams, script: str, args: list[str]) -> list[str]:
    """The DeepSpeed launcher's command line for `script args` on lc's ranks."""
    cmd = [sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", str(lc.procs_per_node),
           "--master_port", str(lc.master_port), "--no_local_rank"]
    if lc.nodes > 1 or lc.hostfile:
        cmd += ["--hostfile", str(lc.hostfile), "--num_nodes", str(lc.nodes)]
        if lc.master_addr:
            cmd += ["--master_addr", lc.master_addr]
    return cmd + [script, *args]


# What the ranks on other nodes need from this environment. DeepSpeed's
# multi-node runners (pdsh, mpi, slurm) forward only NCCL*, PYTHON*, MLFLOW*,
# MV2* and UCX* variables, plus the lines of a `.deepspeed_env` file.
FORWARDED_PREFIXES = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "VLLM_", "MLFLOW_", "DVC_", "GLOO_",
                      "TORCH_", "PYTORCH_", "OMP_", "MKL_", "CUDA_DEVICE_ORDER", "TRITON_")
ENV_FILE = "runs/launcher.env"


def forwarded_env(environ: dict[str, str], user_files: list[Path]) -> list[str]:
    """KEY=VALUE lines for the other nodes: the user's own .deepspeed_env
    lines first (ours replaces its name, see write_env_file), then every
    variable of ours with a forwarded prefix. Values with a newline cannot be
    forwarded this way and are left out."""
    lines = [line.strip() for f in user_files if f.is_file() for line in f.read_text().splitlines()
             if "=" in line and not line.lstrip().startswith("#")]
    lines += [f"{k}={v}" for k, v in sorted(environ.items())
              if k.startswith(FORWARDED_PREFIXES) and "\n" not in v]
    return lines


def write_env_file(path: str | Path = ENV_FILE) -> Path:
    """The environment file DeepSpeed's runner exports to every node; named by
    DS_ENV_FILE (an absolute path, which the runner's lookup keeps as it is)."""
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    user = [Path.home() / ".deepspeed_env", Path(".deepspeed_env")]
    path.write_text("\n".join(forwarded_env(dict(os.environ), user)) + "\n")
    os.environ["DS_ENV_FILE"] = str(path)
    return path


def relaunch(params, argv: list[str] | None = None) -> None:
    """Under `launcher.kind: deepspeed`, become the DeepSpeed launcher (once)."""
    lc = params.launcher
    if lc.kind != "deepspeed":
        return
    if under_launcher():
        watch_stage_process()
        return
    problems = machine_problems(lc)
    if problems:
        raise ConfigError(problems, "launcher")
    argv = sys.argv if argv is None else argv
    if lc.nodes > 1:
        print(f"[launch] environment for the other nodes: {write_env_file()}", flush=True)
    cmd = deepspeed_command(lc, argv[0], argv[1:])
    print(f"[launch] {lc.world} rank(s): {' '.join(cmd)}", flush=True)
    sys.exit(run_launcher(cmd, argv[0], several_nodes=lc.nodes > 1))


STAGE_PID = "RLVR_STAGE_PID"  # the stage process the ranks watch


def run_launcher(cmd: list[str], script: str, several_nodes: bool = False) -> int:
    """Run DeepSpeed's launcher and wait for it, passing stop signals to the
    ranks (on other nodes, through its runner); its exit status."""
    proc = subprocess.Popen(cmd, env={**os.environ, STAGE_PID: str(os.getpid())}, start_new_session=True)

    def forward(signum, frame):
        targets = [proc] if several_nodes else rank_processes(proc.pid, script)
        for p in targets:
            try:
                p.send_signal(signum)
            except (ProcessLookupError, OSError):
                pass

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, forward)
    return proc.wait()


def rank_processes(root: int, script: str) -> list:
    """The ranks under launcher process `root`: the processes running `script`
    (DeepSpeed's own launcher processes name it too, as an argument)."""
    import psutil

    try:
        below = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return []
    ranks = []
    for p in below:
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if script in cmd and not any("deepspeed.launcher" in part for part in cmd):
            ranks.append(p)
    return ranks


def watch_stage_process(interval_s: float = 2.0) -> None:
    """On a rank: end this process if the stage process that launched it is gone."""
    pid = int(os.environ.get(STAGE_PID, "0"))
    if not pid:
        return

    def watch():
        while True:
            time.sleep(interval_s)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                print(f"[launch] the stage process {pid} is gone: ending rank {os.environ.get('RANK')}",
                      file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            except PermissionError:
                pass

    threading.Thread(target=watch, name="watch-stage-process", daemon=True).start()
