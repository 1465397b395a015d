"""What a training run leaves on disk besides its checkpoint: the step log
(steps.csv), the best-on-validation snapshot and, for the paper's checkpoint
protocol (train.snapshot_every), a snapshot every so many steps. Rank 0
writes them.

Snapshots live in runs/<run>/snapshots while training (a resumed run keeps
the one its checkpoint names as best and the protocol's; the trainer deletes
the others), and are hard-linked into the final model's directory at the
end, so DVC caches and pushes them with the model at no extra disk: a
teammate who pulled can re-score them under new evaluation settings.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from pathlib import Path

from rlvr.atomic import atomic_file, write_json

SNAPSHOTS = "snapshots.json"  # in the final model's directory: the snapshots kept and the final model
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

    def __init__(self, root: str | Path, run_hash: str, every: int = 0):
        self.root, self.run_hash, self.every = Path(root), run_hash, every

    def kept(self, step: int) -> bool:
        """A step the paper's checkpoint protocol keeps (every `every` steps; 0: none)."""
        return self.every > 0 and step % self.every == 0

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
        records: a run resumed from it may need no other) and the protocol's."""
        if not self.root.exists():
            return
        keep = self.dir(keep_step) if keep_step is not None else None
        for d in self.root.iterdir():
            if d != keep and not self._kept_dir(d):
                shutil.rmtree(d, ignore_errors=True)

    def _kept_dir(self, d: Path) -> bool:
        step = d.name.removeprefix("step_")
        return step.isdigit() and self.kept(int(step))

    def link_into(self, final_dir: Path, best: dict | None, final_step: int, validation: dict[int, float]) -> None:
        """Hard-link the snapshots kept (the best on validation, the protocol's)
        into the final model's directory and list what the evaluate stage
        scores: those snapshots by step, then the final model. `best` marks
        the choice on validation, `protocol` a step the paper's protocol keeps."""
        best_step = best["step"] if best else None
        steps = sorted({s for s in range(1, final_step) if self.kept(s)} | ({best_step} - {None, final_step}))
        listed = []
        for step in steps:
            if not self.is_current(step):
                continue
            rel = Path("snapshots") / self.dir(step).name
            link_tree(self.dir(step), final_dir / rel)
            listed.append({"step": step, "id": self.identity(step), "path": str(rel),
                           "validation": validation.get(step), "best": step == best_step,
                           "protocol": self.kept(step)})
        listed.append({"step": final_step, "id": self.identity(final_step), "path": ".",
                       "validation": validation.get(final_step), "best": best_step == final_step,
                       "protocol": self.every > 0})
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
