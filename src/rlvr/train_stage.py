"""The train stage's work around the Trainer: tracking, the run's summary,
and which rank does what (rank 0 writes; every rank trains)."""

from __future__ import annotations

import dataclasses
import os
import sys

from rlvr import distributed
from rlvr.atomic import write_json
from rlvr.config import Params
from rlvr.methods import MethodConfig
from rlvr.runs import Run
from rlvr.tracking import NullTracker, Tracker, dataset_input
from rlvr.trainer import StaleCheckpoint, Trainer, TrainingStopped


def run_training(params: Params, method: MethodConfig, run: Run, init_model: str, fresh: bool = False) -> dict:
    """Train `run`, resuming its checkpoint; returns the stage's one-line summary.
    A checkpoint made from other inputs is started over under DVC (it reruns the
    stage because an input changed) or with `fresh`; run by hand, it is an error."""
    ranks = distributed.ranks_from_env()
    tracked = {"train": dataclasses.asdict(method.train), "objective": dataclasses.asdict(method.objective),
               "prompt": dataclasses.asdict(params.prompt.for_training()), "ranks": params.launcher.world, "seed": run.seed}
    tracker = Tracker.for_stage(params, f"train@{run.name}", model=run.method, logged=tracked) \
        if ranks.main else NullTracker()
    trainer = Trainer(params, method, init_model, run.run_dir, run.model_dir, tracker,
                      steps_file=run.train_dir / "steps.csv", fresh_on_change=fresh or "DVC_STAGE" in os.environ)
    try:
        with tracker:
            tracker.log_dataset(dataset_input(params.data.train_dir / "train.jsonl", "train"))
            try:
                trainer.train()
            except TrainingStopped as e:
                print(f"error: {e}", file=sys.stderr)
                sys.exit(3)
            except StaleCheckpoint as e:
                print(f"error: {e}", file=sys.stderr)
                sys.exit(2)
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
