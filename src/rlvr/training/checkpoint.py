"""Training checkpoints: DeepSpeed state + trainer state + every rank's RNG.

Saving and loading are collective (every rank calls them; DeepSpeed writes
its own shards). The checkpoint is built in `<dir>.tmp` and renamed over
`<dir>` by rank 0 only when complete, so a kill at any moment leaves the
previous checkpoint intact. With several nodes, `runs/` must be on a
filesystem every node sees (as DeepSpeed's own checkpoints assume).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import random
import shutil
from pathlib import Path

import numpy as np
import torch

from rlvr import distributed
from rlvr.atomic import commit_dir, recover_dir, remove_dir, staging_dir, write_json
from rlvr.digests import file_md5
from rlvr.schema import settings_hash
from rlvr.stopping import EXIT_FAILED


class StaleCheckpoint(RuntimeError):
    """The run's checkpoint was made from other inputs, and nothing said to start over."""


TAG = "state"  # DeepSpeed writes its own file named "latest"
STATE = "trainer_state.json"


def rng_state() -> dict:
    """This rank's generators. On a GPU vLLM samples from the CUDA generator of
    the rank's device, so that one is saved too."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()  # the current device: the rank's (distributed.init)
    return state


def set_rng_state(s: dict) -> None:
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])
    if torch.cuda.is_available() and "cuda" in s:
        torch.cuda.set_rng_state(s["cuda"])
    elif torch.cuda.is_available():
        print("warning: the checkpoint has no CUDA generator state (written on a CPU): sampling continues "
              "from the engine's seed, not from where the interrupted run stopped", flush=True)


def _rng_file(rank: int) -> str:
    return f"rng_rank{rank}.pt"


def save(ds_engine, ckpt_dir: str | Path, state: dict, ranks: distributed.Ranks | None = None) -> None:
    ranks = ranks or distributed.ranks_from_env()
    ckpt_dir = Path(ckpt_dir)
    tmp = ckpt_dir.with_name(ckpt_dir.name + ".tmp")
    if ranks.main:
        staging_dir(ckpt_dir)
    distributed.barrier()
    try:
        ds_engine.save_checkpoint(str(tmp), tag=TAG)
        torch.save(rng_state(), tmp / _rng_file(ranks.rank))
        if ranks.main:
            write_json(tmp / STATE, state)
    except (OSError, RuntimeError) as e:  # torch reports a full disk as "file write failed", no errno
        if ranks.main:
            remove_dir(tmp)  # the half-written copy: its space back
        raise CheckpointWriteFailed(write_failure(ckpt_dir, e)) from e
    distributed.barrier()
    if ranks.main:
        commit_dir(tmp, ckpt_dir)
    distributed.barrier()


class CheckpointWriteFailed(RuntimeError):
    """A checkpoint could not be written; the previous one is intact."""

    exit_status = EXIT_FAILED


def write_failure(ckpt_dir: Path, error: BaseException) -> str:
    """What failed, the disk's free space (a full disk named as such) and what was kept."""
    free = shutil.disk_usage(ckpt_dir.parent).free
    full = getattr(error, "errno", None) == errno.ENOSPC or free < LOW_DISK or "write failed" in str(error)
    cause = f"no space left on the disk of {ckpt_dir.parent}" if full else f"{type(error).__name__}: {error}"
    state = ckpt_dir / STATE
    kept = (f"the previous checkpoint (step {json.loads(state.read_text())['step']}) is intact" if state.exists()
            else "no earlier checkpoint exists")
    remedy = "free space" if full else "fix that"
    return (f"writing the checkpoint {ckpt_dir} failed: {cause} ({free / 2**30:.2f} GiB free); {kept}; "
            f"{remedy} and rerun to resume")


LOW_DISK = 64 << 20  # less free than this after a failed write: the disk was full


def read_state(ckpt_dir: str | Path) -> dict | None:
    """The trainer state of a complete checkpoint, or None (every rank reads it)."""
    ckpt_dir = Path(ckpt_dir)
    if distributed.ranks_from_env().main:
        recover_dir(ckpt_dir, STATE)
    distributed.barrier()
    path = ckpt_dir / STATE
    return json.loads(path.read_text()) if path.exists() else None


def load(ds_engine, ckpt_dir: str | Path, ranks: distributed.Ranks | None = None) -> dict:
    ranks = ranks or distributed.ranks_from_env()
    ckpt_dir = Path(ckpt_dir)
    ds_engine.load_checkpoint(str(ckpt_dir), tag=TAG)
    set_rng_state(torch.load(ckpt_dir / _rng_file(ranks.rank), weights_only=False))
    return json.loads((ckpt_dir / STATE).read_text())


def run_identity(params, method, prompt, model_path: str, train_file: Path, world: int) -> dict[str, str]:
    """What a checkpoint is valid for, input by input (a hash each): a
    checkpoint from other inputs cannot be resumed. `method`: the run's
    MethodConfig; `prompt`: its training prompt."""
    parts = {"training settings": dataclasses.asdict(method.train),
             "objective settings": dataclasses.asdict(method.objective), "initial model": model_path,
             "training data": file_md5(train_file), "training prompt": dataclasses.asdict(prompt),
             "number of ranks": world}
    if method.train.eval_every:  # what the choice of the best checkpoint depends on
        path = params.data.validation_file
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: train.eval_every validates on problems held out of the "
                                    "training mixture; set data.validation_size (or data.arithmetic.n_validation_per_level) "
                                    "and run dvc repro prepare_data")
        parts.update({"validation data": file_md5(path),
                      "validation settings": dataclasses.asdict(params.validation)})
    return {name: settings_hash(value) for name, value in parts.items()}


def usable_state(ckpt_dir: Path, identity: dict[str, str], fresh_on_change: bool, say,
                 set_aside: tuple[Path, ...] = ()) -> dict | None:
    """The checkpoint's state if it can be resumed. One made from other inputs
    (`identity`: run_identity's) is refused, naming the inputs that changed,
    or (`fresh_on_change`) set aside with the run's other files (`set_aside`:
    the checkpoint, snapshots, step log) until the new run's first checkpoint:
    a run that fails before it gets them back (restore_aside)."""
    state = read_state(ckpt_dir)
    if state is None or state.get("params_hash") == settings_hash(identity):
        return state
    saved = state.get("identity") or {}
    changed = [name for name, h in identity.items() if saved.get(name) != h]
    what = (f"{ckpt_dir} (step {state.get('step')}) was made with other "
            f"{', '.join(changed) or 'inputs (an earlier version of this trainer)'}")
    if not fresh_on_change:
        raise StaleCheckpoint(f"{what}: rerun with --fresh to start over (setting it and the step log aside), or "
                              "restore those inputs to resume it")
    say(f"{what}: starting fresh; it waits in {aside(ckpt_dir)} until the new run's first checkpoint")
    if distributed.ranks_from_env().main:
        for path in dict.fromkeys((ckpt_dir, *set_aside)):
            _remove(aside(path))  # an older one set aside
            if path.exists():
                path.rename(aside(path))
    distributed.barrier()
    return None


def aside(path: Path) -> Path:
    return path.with_name(path.name + ".stale")


def drop_aside(*paths: Path) -> None:
    """The new run has its own checkpoint: what was set aside goes (rank 0)."""
    for path in paths:
        _remove(aside(path))


def restore_aside(*paths: Path) -> bool:
    """The new run failed before its first checkpoint: what was set aside comes
    back, replacing what the new run began (rank 0). True if anything did."""
    back = [p for p in paths if aside(p).exists()]
    for path in back:
        _remove(path)
        aside(path).rename(path)
    return bool(back)


def _remove(path: Path) -> None:
    if path.is_dir():
        remove_dir(path)
    else:
        path.unlink(missing_ok=True)
