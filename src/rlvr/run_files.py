"""What a training run leaves on disk besides its checkpoint: the step log
(steps.csv) and the best-on-validation snapshot. Rank 0 writes them.

Snapshots live in runs/<run>/snapshots while training (a resumed run keeps
the one its checkpoint names as best; the trainer deletes the others), and
the best one is hard-linked into the final model's directory at the end, so
DVC caches and pushes it with the model at no extra disk: a teammate who
pulled can re-score it under new evaluation settings.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from pathlib import Path

from rlvr.atomic import atomic_file, write_json

SNAPSHOTS = "snapshots.json"  # in the final model's directory: the best snapshot and the final model
SNAPSHOT_ID = "snapshot.json"  # in each snapshot: which run and step it is


class StepLog:
    """steps.csv: one row per rollout step, rewritten atomically on each append."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def append(self, row: dict) -> None:
        rows = read_csv(self.path)
        if rows and int(float(rows[-1]["step"])) >= int(row["step"]):
            raise RuntimeError(f"{self.path} already holds step {rows[-1]['step']}: step {row['step']} would repeat "
                               "or reorder it (two trainers on one run? rlvr.training.run_lock keeps them apart)")
        write_csv(self.path, rows + [row])

    def truncate(self, last_step: int) -> None:
        """Drop the rows after `last_step` (a run resumed from an earlier checkpoint)."""
        rows = [r for r in read_csv(self.path) if int(float(r["step"])) <= last_step]
        if rows or self.path.exists():
            write_csv(self.path, rows)

    def last_step(self) -> int:
        rows = read_csv(self.path)
        return int(float(rows[-1]["step"])) if rows else 0

    def history(self) -> list[dict[str, float]]:
        """Every recorded step, resumed ones included, as numbers."""
        number = lambda k, v: int(float(v)) if k == "step" else float(v)  # noqa: E731
        return [{k: number(k, v) for k, v in r.items() if v not in ("", None)} for r in read_csv(self.path)]


class Snapshots:
    """The HF snapshots of one run, each marked with the identity of the
    weights it holds (the run's settings hash and the step), so a stale one
    is never taken for it."""

    def __init__(self, root: str | Path, run_hash: str):
        self.root, self.run_hash = Path(root), run_hash

    def identity(self, step: int) -> str:
        return f"{self.run_hash}-{step}"

    def dir(self, step: int) -> Path:
        return self.root / f"step_{step:06d}"

    def mark(self, step: int) -> None:
        write_json(self.dir(step) / SNAPSHOT_ID, {"id": self.identity(step), "step": step})

    def is_current(self, step: int) -> bool:
        marker = self.dir(step) / SNAPSHOT_ID
        return marker.exists() and json.loads(marker.read_text())["id"] == self.identity(step)

    def prune(self, keep_step: int | None) -> None:
        """Delete every snapshot but `keep_step`'s (the best the last checkpoint
        records: a run resumed from it may need no other)."""
        if not self.root.exists():
            return
        keep = self.dir(keep_step) if keep_step is not None else None
        for d in self.root.iterdir():
            if d != keep:
                shutil.rmtree(d, ignore_errors=True)

    def link_into(self, final_dir: Path, best: dict | None, final_step: int, validation: dict[int, float]) -> None:
        """Hard-link the best-on-validation snapshot into the final model's
        directory (unless the best is the final step) and list what the
        evaluate stage scores: that snapshot, then the final model."""
        listed = []
        if best and best["step"] != final_step and self.is_current(best["step"]):
            rel = Path("snapshots") / self.dir(best["step"]).name
            link_tree(self.dir(best["step"]), final_dir / rel)
            listed.append({"step": best["step"], "id": self.identity(best["step"]), "path": str(rel),
                           "validation": validation.get(best["step"]), "best": True})
        listed.append({"step": final_step, "id": self.identity(final_step), "path": ".",
                       "validation": validation.get(final_step), "best": bool(best) and best["step"] == final_step})
        write_json(final_dir / SNAPSHOTS, listed)


def disk_per_run(n_params: int, t) -> dict[str, float]:
    """Bytes one training run keeps on disk, from its parameter count and
    train: settings (TrainParams). The checkpoint holds the module weights
    and ZeRO's float32 master copy with Adam's two moments, partitioned over
    the ranks but the same in total; a save writes it beside the previous one.
    Snapshots and the final model are module weights. DVC hard-links models/
    into its cache (cache.type), and the best snapshot in models/ is a hard
    link to runs/: one copy each. `every_snapshot` is what keeping a snapshot
    every eval_every steps cost: each in runs/ and once more in a copying cache."""
    model = n_params * (2 if t.bf16 else 4)
    checkpoint = model + 12 * n_params
    best = model if t.eval_every else 0
    steady = checkpoint + best + model  # the best snapshot (runs/ = models/ = cache) and the final model
    snapshots = t.steps // t.eval_every - (t.steps % t.eval_every == 0) if t.eval_every else 0
    return {"model": model, "checkpoint": checkpoint, "steady": steady,
            "peak": steady + checkpoint + best,  # a save beside the old checkpoint, a new best awaiting it
            "every_snapshot": checkpoint + 2 * model * (snapshots + 1)}


def link_tree(src: Path, dst: Path) -> None:
    """dst as a copy of src made of hard links (a plain copy across file systems)."""
    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=link)


def read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_csv(path: Path, rows: list[dict]) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with atomic_file(path, newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) and math.isfinite(v) else v) for k, v in r.items()})
