"""The train stage's work around the Trainer: tracking, the run's summary,
and which rank does what (rank 0 writes; every rank trains)."""

from __future__ import annotations

import dataclasses
import os
import sys

from rlvr import distributed
from rlvr.atomic import write_json
from rlvr.runs import Run, run_color
from rlvr.settings.methods import MethodConfig
from rlvr.settings.sections import Params
from rlvr.stopping import EXIT_CONFIG, EXIT_STOPPED, TrainingAborted, TrainingFailed, TrainingStopped
from rlvr.tracking.names import KEY_CURVES, OVER_RUN, ROW_TAG, step_metric_key
from rlvr.tracking.provenance import dataset_input
from rlvr.tracking.tracker import NullTracker, Tracker
from rlvr.training.checkpoint import CheckpointWriteFailed, DamagedCheckpoint, StaleCheckpoint
from rlvr.training.run_lock import RunLocked
from rlvr.training.trainer import Trainer


def run_training(params: Params, method: MethodConfig, run: Run, init_model: str, fresh: bool = False) -> dict:
    """Train `run`, resuming its checkpoint; returns the stage's one-line summary.
    A checkpoint made from other inputs is started over under DVC (it reruns the
    stage because an input changed) or with `fresh`; run by hand, it is an error. A
    damaged checkpoint is set aside only with `fresh` (asked for), else the stage ends naming it.
    A stop (rlvr.stopping) ends the stage with its exit status, the MLflow run KILLED."""
    ranks = distributed.ranks_from_env()
    tracked = {"train": dataclasses.asdict(method.train), "objective": dataclasses.asdict(method.objective),
               "prompt": dataclasses.asdict(params.prompt.for_training()), "ranks": params.launcher.world, "seed": run.seed}
    tags = {**ROW_TAG, "mlflow.runColor": run_color(params, run.method)}  # the report's colour in MLflow too
    tracker = Tracker.for_stage(params, f"train@{run.name}", model=run.method, logged=tracked, start=False,
                                tags=tags) if ranks.main else NullTracker()
    tracker.log_dataset(dataset_input(params.data.train_dir / "train.jsonl", "train"))
    trainer = Trainer(params, method, init_model, run.run_dir, run.model_dir, tracker,
                      steps_file=run.train_dir / "steps.csv", fresh_on_change=fresh or "DVC_STAGE" in os.environ,
                      fresh_if_damaged=fresh)
    try:
        with tracker:  # started by the trainer once it knows the checkpoint it resumes
            trainer.train()
            if ranks.main:  # the runs table's training columns: a step of B questions is too noisy to read alone
                tracker.log_metrics({f"{step_metric_key(k)}{OVER_RUN}": v
                                     for k, v in run_means(trainer.outputs.history()).items() if k in KEY_CURVES})
            tracker.log_artifact(trainer.steps_file)
            tracker.log_model(run.model_dir, name=run.name.replace("/", "-"))
    except (StaleCheckpoint, RunLocked) as e:
        stop_stage(e, EXIT_CONFIG)
    except (TrainingStopped, TrainingAborted, TrainingFailed, CheckpointWriteFailed, DamagedCheckpoint) as e:
        stop_stage(e, getattr(e, "exit_status", EXIT_STOPPED))
    finally:
        distributed.barrier()
    if not ranks.main:
        return {}
    rows = trainer.outputs.history()  # all steps, also those of an earlier, resumed invocation
    write_summary(run.train_dir / "summary.json", rows, method.train.steps)
    last = rows[-1]
    return {k: round(last[k], 3) for k in ("reward_mean", "entropy", "kl", "time_total") if k in last}


def run_means(rows: list[dict]) -> dict[str, float]:
    """Each metric's mean over the run's steps (those that logged it)."""
    keys = dict.fromkeys(k for r in rows for k in r if k != "step")
    return {k: float(sum(r[k] for r in rows if k in r) / sum(k in r for r in rows)) for k in keys}


def write_summary(path, rows: list[dict], steps: int) -> None:
    """The run's first and last recorded steps (resumed invocations included) and
    every metric's mean over its steps; a finished training with no step recorded
    is an error, never an empty summary."""
    if not rows:
        raise RuntimeError(f"the step log beside {path} has no step although training finished; "
                           "delete the run's checkpoint (runs/) and rerun the stage")
    write_json(path, {"steps": steps, "final": rows[-1], "first": rows[0], "mean": run_means(rows)})


def stop_stage(error: BaseException, status: int) -> None:
    print(f"error: {error}", file=sys.stderr, flush=True)
    sys.exit(status)
