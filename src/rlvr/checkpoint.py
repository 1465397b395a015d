"""Atomic training checkpoints: DeepSpeed state + trainer state + RNG.

A checkpoint is written into `<dir>.tmp` and renamed over `<dir>` only when
complete, so a kill at any moment leaves the previous checkpoint intact.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch

TAG = "state"  # DeepSpeed writes its own file named "latest"
STATE = "trainer_state.json"


def params_hash(*sections) -> str:
    blob = json.dumps(sections, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(s: dict) -> None:
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])


def save(engine, ckpt_dir: str | Path, state: dict) -> None:
    ckpt_dir = Path(ckpt_dir)
    tmp, old = ckpt_dir.with_name(ckpt_dir.name + ".tmp"), ckpt_dir.with_name(ckpt_dir.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    engine.save_checkpoint(str(tmp), tag=TAG)
    torch.save(rng_state(), tmp / "rng.pt")
    (tmp / STATE).write_text(json.dumps(state, indent=2))
    if ckpt_dir.exists():
        os.replace(ckpt_dir, old)
    os.replace(tmp, ckpt_dir)
    shutil.rmtree(old, ignore_errors=True)


def read_state(ckpt_dir: str | Path) -> dict | None:
    """The trainer state of a complete checkpoint, or None. A crash between
    the two renames in `save` leaves only `.old`: that one is then used."""
    ckpt_dir = Path(ckpt_dir)
    old = ckpt_dir.with_name(ckpt_dir.name + ".old")
    if not (ckpt_dir / STATE).exists() and (old / STATE).exists():
        os.replace(old, ckpt_dir)
    path = ckpt_dir / STATE
    return json.loads(path.read_text()) if path.exists() else None


def load(engine, ckpt_dir: str | Path) -> dict:
    ckpt_dir = Path(ckpt_dir)
    engine.load_checkpoint(str(ckpt_dir), tag=TAG)
    set_rng_state(torch.load(ckpt_dir / "rng.pt", weights_only=False))
    return json.loads((ckpt_dir / STATE).read_text())


def discard(ckpt_dir: str | Path) -> None:
    for suffix in ("", ".tmp", ".old"):
        shutil.rmtree(Path(str(ckpt_dir) + suffix), ignore_errors=True)
