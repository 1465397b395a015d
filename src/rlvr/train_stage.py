"""The train stage's work around the Trainer: tracking, the run's summary,
and which rank does what (rank 0 writes; every rank trains)."""

from __future__ import annotations

import dataclasses
import sys
from contextlib import nullcontext

from rlvr import distributed
from rlvr.atomic import write_json
from rlvr.methods import MethodConfig
from rlvr.config import Params
from rlvr.runs import Run
from rlvr.tracking import Tracker, dataset_input
from rlvr.trainer import Trainer, TrainingStopped


def run_training(params: Params, method: MethodConfig, run: Run, init_model: str) -> dict:
    """Train `run`, resuming its checkpoint; returns the stage's one-line summary."""
    ranks = distributed.ranks_from_env()
    tracked = {"train": dataclasses.asdict(method.train), "objective": dataclasses.asdict(method.objective),
               "prompt": dataclasses.asdict(params.prompt.for_training()), "ranks": params.launcher.world, "seed": run.seed}
    tracker = Tracker.for_stage(params, f"train@{run.name}", model=run.method, logged=tracked) \
        if ranks.main else None
    trainer = Trainer(params, method, init_model, run.run_dir, run.model_dir, tracker,
                      steps_file=run.train_dir / "steps.csv")
    try:
        with tracker or nullcontext():
            if tracker:
                tracker.log_dataset(dataset_input(params.data.train_dir / "train.jsonl", "train"))
            try:
                trainer.train()
            except TrainingStopped as e:
                print(f"error: {e}", file=sys.stderr)
                sys.exit(3)
            if tracker:
                tracker.log_artifact(trainer.steps_file)
                tracker.log_model(run.model_dir, name=run.name.replace("/", "-"))
    finally:
        distributed.barrier()
    if not ranks.main:
        return {}
    rows = trainer.history()  # all steps, also those of an earlier, resumed invocation
    last = rows[-1] if rows else {}
    write_json(run.train_dir / "summary.json", {"steps": method.train.steps, "final": last,
                                                 "first": rows[0] if rows else None})
    return {k: round(last[k], 3) for k in ("reward_mean", "entropy", "kl", "time_total") if k in last}
