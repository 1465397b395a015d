"""The MLflow run a stage logs into: one per stage execution, nested under
its pipeline execution's (or its training's), degrading to a warning, never
an error, when the store fails."""

from __future__ import annotations

import os
import socket
import time
import warnings
from pathlib import Path

from rlvr.digests import tree_md5
from rlvr.stopping import TrainingAborted, TrainingStopped
from rlvr.tracking.cleanup import (
    artifact_location,
    close_abandoned_runs,
    drop_metric_steps,
    latest_run,
    relocate_artifacts,
    run_in,
)
from rlvr.tracking.names import PIPELINE_KEY, PROCESS_TAG, STEP_PREFIXES, flatten, step_metric_key
from rlvr.tracking.provenance import (
    MLFLOW_ENV,
    DatasetInput,
    environment_kept,
    experiment_name,
    git_commit,
    pipeline_key,
    tracking_uri,
)
from rlvr.tracking.views import experiment_tags, view_of


class Tracker:
    """An MLflow run that degrades to a no-op (with one warning) on store errors.

    A stage's run starts at once, or (`start=False`) when the stage calls
    `start`: training starts it once it knows which checkpoint it resumes, so a
    resumed training continues the MLflow run its checkpoint names, one
    history from the first step to the last. Starting closes the runs of the
    same stage that a killed process left RUNNING (KILLED, with their last step)."""

    def __init__(self, stage: str, experiment: str = "rlvr", uri: str = "", model: str = "",
                 params: dict | None = None, run_name: str | None = None, system_metrics: bool = False,
                 k: int = 4, start: bool = True, tags: dict | None = None, parent_stage: str | None = None,
                 set_ks: dict[str, int] | None = None):
        """`parent_stage`: nest this run under that stage's latest run (an
        evaluation under its training), found as `parent_run_id`; without one,
        under the pipeline execution's run."""
        self.stage, self.enabled, self.run_id, self._view = stage, True, None, (k, set_ks)
        self.parent_stage, self.parent_run_id, self._tags = parent_stage, None, tags or {}
        self._settings = (experiment, tracking_uri(uri), model, run_name, system_metrics)
        self._params, self._datasets = params or {}, []
        if start:
            self.start()

    @classmethod
    def for_stage(cls, params, stage: str, model: str = "", logged: dict | None = None,
                  system_metrics: bool = True, **kwargs) -> "Tracker":
        """A stage's run in the store and experiment `params.tracking` names."""
        return cls(stage, params.tracking.experiment, params.tracking.uri, model=model, params=logged,
                   system_metrics=system_metrics, k=view_of(params)[0], set_ks=view_of(params)[1], **kwargs)

    def start(self, resume: str | None = None) -> None:
        """Start the run, or continue run `resume` if the store has it (once)."""
        if self.run_id is None and self.enabled:
            self._guard(self._start, resume)

    def _start(self, resume: str | None):
        import mlflow

        experiment, uri, model, run_name, system_metrics = self._settings
        self._mlflow = mlflow
        with environment_kept(MLFLOW_ENV):  # mlflow.set_* export them; tracking_uri must still see the user's
            mlflow.set_tracking_uri(uri)
            exp_id = self._experiment(experiment, uri)
            mlflow.set_experiment(experiment_id=exp_id)
        for key, value in experiment_tags(*self._view).items():
            mlflow.set_experiment_tag(key, value)
        tags = {"stage": self.stage, "model": model, "git_commit": git_commit(), "dvc_exp": experiment_name(),
                **self._tags}
        resume = resume if resume and run_in(resume, exp_id) else None
        close_abandoned_runs(exp_id, self.stage, tags["dvc_exp"], keep=resume)
        process = {PROCESS_TAG: f"{socket.gethostname()}:{os.getpid()}"}
        if resume:
            self._resumed_status = mlflow.get_run(resume).info.status
            run = mlflow.start_run(run_id=resume, log_system_metrics=system_metrics)
            mlflow.set_tags(process)
        else:
            self.parent_run_id = self.parent_stage and latest_run(exp_id, self.parent_stage, tags["dvc_exp"])
            run = mlflow.start_run(run_name=run_name or self.stage, tags={**tags, **process},
                                   parent_run_id=self.parent_run_id or self._parent_run(exp_id, tags),
                                   log_system_metrics=system_metrics)
        self.run_id = run.info.run_id
        if not resume:
            self.log_params(self._params)
            for ds in self._datasets:
                self.log_dataset(ds)

    def _experiment(self, name: str, uri: str) -> str:
        """The experiment's id (made now if new), its artifacts beside the store."""
        import mlflow

        location = artifact_location(uri)
        exp = mlflow.get_experiment_by_name(name)
        if exp is None:
            return mlflow.create_experiment(name, artifact_location=location)
        relocate_artifacts(uri, exp, location)
        return exp.experiment_id

    def _parent_run(self, exp_id: str, tags: dict) -> str:
        """The pipeline execution's parent run, found by its key or made now."""
        from mlflow.tracking import MlflowClient

        key = pipeline_key()
        client = MlflowClient()
        found = client.search_runs([exp_id], filter_string=f"tags.`{PIPELINE_KEY}` = '{key}'", max_results=1)
        if found:
            return found[0].info.run_id
        name = f"pipeline {experiment_name()} @ {tags['git_commit'][:8]}"
        parent = client.create_run(exp_id, run_name=name, tags={PIPELINE_KEY: key, "dvc_exp": tags["dvc_exp"],
                                                                "git_commit": tags["git_commit"]})
        client.set_terminated(parent.info.run_id)
        return parent.info.run_id

    def _guard(self, fn, *args, **kwargs):
        if not self.enabled:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001  any store failure: keep computing
            self.enabled = False
            warnings.warn(
                f"MLflow tracking disabled for stage '{self.stage}' ({type(e).__name__}: {e}); "
                "metrics are still written to the stage's local files",
                stacklevel=3,
            )
            return None

    def log_params(self, params: dict) -> None:
        if self.run_id is None:  # logged when the run starts
            self._params = {**self._params, **params}
            return
        items = list(flatten(params).items())
        for i in range(0, len(items), 100):  # MLflow caps a batch at 100 params
            self._guard(lambda chunk: self._mlflow.log_params(dict(chunk)), items[i : i + 100])

    def log_metrics(self, metrics: dict[str, float], step: int | None = None, run_id: str | None = None) -> None:
        """Into this run, or (`run_id`) another, as an evaluation's headline into its training's."""
        clean = {k.replace("@", "_at_"): float(v) for k, v in metrics.items() if v is not None}
        self._guard(lambda: self._mlflow.log_metrics(clean, step=step, run_id=run_id))

    def log_step(self, row: dict, completions: list[dict] | None = None) -> None:
        """A training step's row of steps.csv, under sectioned names (step_metric_key),
        and a few of its sampled completions as a table (completions/step_<n>.json)."""
        step = int(row["step"])
        self.log_metrics({step_metric_key(k): v for k, v in row.items() if k != "step"}, step=step)
        if completions:
            self.log_table(completions, f"completions/step_{step:06d}.json")

    def log_table(self, rows: list[dict], artifact_file: str) -> None:
        if not rows:
            return
        columns = {k: [r.get(k) for r in rows] for k in rows[0]}
        self._guard(lambda: self._mlflow.log_table(data=columns, artifact_file=artifact_file))

    def log_dataset(self, ds: DatasetInput) -> None:
        """A dataset as an MLflow input: its name, path and content digest (no
        copy); logged when the run starts if it has not yet."""
        if self.run_id is None:
            self._datasets.append(ds)
            return

        def log():
            from mlflow.data.dataset_source_registry import resolve_dataset_source
            from mlflow.data.meta_dataset import MetaDataset

            with warnings.catch_warnings():  # "can be interpreted in multiple ways": all of them local files
                warnings.simplefilter("ignore")
                source = resolve_dataset_source(str(Path(ds.path).resolve()))
            self._mlflow.log_input(MetaDataset(source, name=ds.name, digest=ds.digest), context=ds.context)

        self._guard(log)

    def log_model(self, model_dir: str | Path, name: str) -> None:
        """Link the trained model to this run by its DVC path and md5, without
        copying its weights into the artifact store."""
        def log():
            digest = tree_md5(model_dir)
            self._mlflow.create_external_model(name=name, source_run_id=self.run_id, model_type="dvc-output",
                                               params={"dvc_path": str(model_dir), "md5": digest})
            self._mlflow.set_tags({"model_path": str(model_dir), "model_md5": digest})

        self._guard(log)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        if Path(path).exists():
            self._guard(lambda: self._mlflow.log_artifact(str(path), artifact_path))

    def drop_steps_after(self, step: int) -> None:
        """A resumed training redoes the steps after its checkpoint's `step`: their values
        logged by the attempt that died go, so each step holds one value (SQL stores, the
        default sqlite one; another store keeps them, and this says so)."""
        if self.run_id is not None:
            self._guard(self._drop_steps_after, step)

    def _drop_steps_after(self, step: int) -> None:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
        from mlflow.tracking._tracking_service.utils import _get_store

        store = _get_store()
        if not isinstance(store, SqlAlchemyStore):
            warnings.warn(f"the MLflow store ({type(store).__name__}) cannot drop values: the steps after {step} "
                          "that the stopped attempt logged stay beside the resumed ones", stacklevel=3)
            return
        dropped = drop_metric_steps(store, self.run_id, step, STEP_PREFIXES)
        if dropped:
            print(f"[tracking] dropped {dropped} metric values of steps after {step} (the resumed run redoes them)",
                  flush=True)

    def close(self, status: str = "FINISHED") -> None:
        if self.run_id is not None:
            if status != "FINISHED" and getattr(self, "_resumed_status", None) == "FINISHED":
                # a later attempt on a finished training (its checkpoint damaged, say) does not unfinish it
                self._guard(lambda: self._mlflow.set_tag("rlvr.later_attempt", f"{status} {time.strftime('%c')}"))
                status = "FINISHED"
            self._guard(lambda: self._mlflow.end_run(status=status))
        self.enabled = False

    def __enter__(self) -> "Tracker":
        return self

    def __exit__(self, exc_type, *rest) -> None:
        self.close(end_status(exc_type))


def end_status(exc_type) -> str:
    """A run's status for how its stage ended: stopped or killed by a signal
    (KILLED), an error (FAILED), or not at all (FINISHED)."""
    if exc_type is None:
        return "FINISHED"
    return "KILLED" if issubclass(exc_type, (TrainingStopped, TrainingAborted, KeyboardInterrupt)) else "FAILED"


class NullTracker:
    """What ranks other than 0 (and runs without a store) track: nothing, with
    Tracker's methods, so callers never ask whether they have a tracker."""

    enabled, run_id, parent_run_id = False, None, None

    def __getattr__(self, name):
        return lambda *args, **kwargs: None

    def __enter__(self) -> "NullTracker":
        return self

    def __exit__(self, *exc) -> None:
        pass
