"""Where each run's files live: the base model, every released checkpoint
evaluated as a row (`checkpoints:`), and every (method, seed) pair of the
train matrix. One place, for the stages, the report and the tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BASE = "base"


@dataclass(frozen=True)
class Run:
    method: str  # a name under `methods:` or `checkpoints:`, or "base"
    seed: int | None = None  # None for the base model and the checkpoints
    external: bool = False  # a released checkpoint, not trained here

    @property
    def trained(self) -> bool:
        """Trained here (a method and seed), with a step log."""
        return not self.external and self.seed is not None

    @property
    def name(self) -> str:
        return self.method if self.seed is None else f"{self.method}/seed{self.seed}"

    @property
    def model_dir(self) -> Path:
        return Path("models") / self.name

    @property
    def run_dir(self) -> Path:
        """Checkpoints and snapshots: local, resumable, not DVC-cached."""
        return Path("runs") / self.name

    @property
    def train_dir(self) -> Path:
        """steps.csv and summary.json."""
        return Path("reports/train") / self.name

    @property
    def eval_dir(self) -> Path:
        return Path("reports/eval") / self.name


def trained_runs(params) -> list[Run]:
    methods = params.extra.get("methods") or {}
    return [Run(m, s) for m in methods for s in params.seeds]


def checkpoint_runs(params) -> list[Run]:
    return [Run(name, external=True) for name in params.extra.get("checkpoints") or {}]


def all_runs(params) -> list[Run]:
    return [Run(BASE), *checkpoint_runs(params), *trained_runs(params)]
