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
    return [Run(m, s) for m in params.methods for s in params.seeds]


def checkpoint_runs(params) -> list[Run]:
    return [Run(name, external=True) for name in params.checkpoints]


def all_runs(params) -> list[Run]:
    return [Run(BASE), *checkpoint_runs(params), *trained_runs(params)]


# Each model's colour in every figure of the report and in MLflow's runs table (the `mlflow.runColor`
# tag of its training runs): matplotlib's tab10, by its place among the report's models.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
COLOR_NAMES = dict(zip(PALETTE, ("blue", "orange", "green", "red", "purple", "brown", "pink", "grey", "olive", "cyan")))


def method_colors(methods: list[str]) -> dict[str, str]:
    """One colour per model, in the report's order (base first)."""
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(methods)}


def run_color(params, method: str) -> str:
    """A method's colour, as the report draws it (the report's models: every run of params)."""
    return method_colors(list(dict.fromkeys(r.method for r in all_runs(params))))[method]
