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
            remove_dir(tmp)  # the half-written copy: its space back (measured after, in the message)
        raise CheckpointWriteFailed(write_failure(ckpt_dir, e, checkpoint_bytes(ckpt_dir, ds_engine))) from e
    distributed.barrier()
    if ranks.main:
        commit_dir(tmp, ckpt_dir)
    distributed.barrier()


class CheckpointWriteFailed(RuntimeError):
    """A checkpoint could not be written; the previous one is intact."""

    exit_status = EXIT_FAILED


def checkpoint_bytes(ckpt_dir: Path, ds_engine) -> int:
    """What one checkpoint takes on disk: the previous one's size, or else the engine's
    weights and optimizer state in memory (a checkpoint writes both)."""
    if (ckpt_dir / STATE).exists():
        return sum(f.stat().st_size for f in ckpt_dir.rglob("*") if f.is_file())
    tensors = list(getattr(getattr(ds_engine, "module", None), "parameters", lambda: [])())
    state = getattr(getattr(ds_engine, "optimizer", None), "state", {}) or {}
    tensors += [t for st in state.values() if isinstance(st, dict) for t in st.values() if torch.is_tensor(t)]
    return sum(t.numel() * t.element_size() for t in tensors)


def write_failure(ckpt_dir: Path, error: BaseException, needed: int = 0) -> str:
    """What failed, the disk's free space (a full disk named as such, with what a checkpoint
    needs) and what was kept. Called once the failed write's partial copy is removed."""
    free = shutil.disk_usage(ckpt_dir.parent).free
    full = getattr(error, "errno", None) == errno.ENOSPC or free < max(LOW_DISK, needed) or "write failed" in str(error)
    cause = f"no space left on the disk of {ckpt_dir.parent}" if full else f"{type(error).__name__}: {error}"
    state = ckpt_dir / STATE
    kept = (f"the previous checkpoint (step {json.loads(state.read_text())['step']}) is intact" if state.exists()
            else "no earlier checkpoint exists")
    need = f", a checkpoint needs about {needed / 2**30:.2f} GiB" if needed else ""
    remedy = "free space" if full else "fix that"
    return (f"writing the checkpoint {ckpt_dir} failed: {cause} ({free / 2**30:.2f} GiB free{need}); {kept}; "
            f"{remedy} and rerun to resume")


LOW_DISK = 64 << 20  # less free than this after a failed write: the disk was full


class DamagedCheckpoint(RuntimeError):
    """A checkpoint directory with a file missing, empty or unreadable: named, never resumed
    from, never silently replaced by a fresh start."""

    exit_status = EXIT_FAILED


def read_state(ckpt_dir: str | Path) -> dict | None:
    """The trainer state of a complete checkpoint, or None where there is no checkpoint
    (every rank reads it); DamagedCheckpoint where its directory has no readable state."""
    ckpt_dir = Path(ckpt_dir)
    if distributed.ranks_from_env().main:
        recover_dir(ckpt_dir, STATE)
    distributed.barrier()
    path = ckpt_dir / STATE
    if not path.exists():
        if ckpt_dir.is_dir() and any(ckpt_dir.iterdir()):
            raise DamagedCheckpoint(f"{path} is missing")
        return None
    text = path.read_text()
    try:
        state = json.loads(text)
    except ValueError:
        raise DamagedCheckpoint(f"{path} is {'empty' if not text.strip() else 'not valid JSON (cut short?)'}") \
            from None
    if not isinstance(state, dict) or "step" not in state:
        raise DamagedCheckpoint(f"{path} holds no trainer state (no 'step')")
    return state


def check_files(ckpt_dir: str | Path) -> None:
    """Every tensor file of the checkpoint is there and readable (opened memory-mapped: the
    zip directory and pickle are read, not the tensors): DamagedCheckpoint naming the first
    that is not, before any engine loads it."""
    ckpt_dir = Path(ckpt_dir)
    files = sorted(ckpt_dir.rglob("*.pt"))
    if not any(f.name.startswith("rng_rank") for f in files):
        raise DamagedCheckpoint(f"{ckpt_dir / _rng_file(0)} is missing")
    if not (ckpt_dir / TAG).is_dir():
        raise DamagedCheckpoint(f"{ckpt_dir / TAG} (the model and optimizer state) is missing")
    for f in files:
        if f.stat().st_size == 0:
            raise DamagedCheckpoint(f"{f} is empty")
        try:
            torch.load(f, map_location="cpu", mmap=True, weights_only=False)
        except Exception as e:  # noqa: BLE001  a cut-short zip, a broken pickle: the file is named
            raise DamagedCheckpoint(f"{f} cannot be read ({type(e).__name__}: {str(e)[:120]}; cut short?)") from None


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
