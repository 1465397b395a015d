"""MLflow tracking: one run per stage execution, nested under one parent run
per pipeline execution, in an explicit sqlite store.

The store is the user's repository's (`DVC_ROOT`, which DVC points at the
parent repository also for `--queue` and `--temp` experiments, whose stages
run in a temporary copy). Stage runs of one execution share a parent: the same
git commit, params.yaml and DVC experiment name. Tracking must never cost a
result: if the store is locked or unreachable the stage goes on, metrics still
reach the local files, and a warning says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rlvr.digests import tree_md5
from rlvr.stopping import TrainingAborted, TrainingStopped

EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}  # a model-training experiment
PIPELINE_KEY = "rlvr.pipeline"
PROCESS_TAG = "rlvr.process"  # host:pid of the process a run belongs to
RUNS_VIEW = "runs"  # the shared view the runs-table URL opens (experiment tag mlflow.sharedViewState.<this>)


ROW_TAG = {"table": "model"}  # the runs the table shows: one per trained method and seed
# steps.csv columns charted first (section "train"); the rest go to "train details", validation to "val".
# MLflow sections a run's charts by the text before the last '/', in code-unit order, "Model metrics"
# (names without '/': the evaluation's headline) and "System metrics" last.
KEY_CURVES = ("reward_mean", "accuracy", "entropy", "response_length", "kl", "loss")
HEADLINE_KINDS = ("avg", "maj", "pass")


def step_metric_key(column: str) -> str:
    """A steps.csv column's MLflow name."""
    if column.startswith("val_"):
        return f"val/{column[4:]}"
    return f"train/{column}" if column in KEY_CURVES else f"train details/{column}"


def headline_name(benchmark: str, kind: str, k: int) -> str:
    return f"eval {benchmark} {kind}@{k}".replace("@", "_at_")


def headline_metrics(metrics: dict) -> dict[str, float]:
    """An evaluation's headline (avg@k, maj@k, pass@k per set and their mean),
    rounded to 4 digits for the runs table; metrics.json keeps the exact values."""
    k, out = metrics["k"], {}
    for name, m in {"mean": metrics["mean"], **metrics["benchmarks"]}.items():
        for kind in HEADLINE_KINDS:
            k_set = metrics.get("k_per_set", {}).get(name, k)
            if f"{kind}@{k_set}" in m:
                out[headline_name(name, kind, k_set)] = round(float(m[f"{kind}@{k_set}"]), 4)
    return out


def runs_view(k: int, set_ks: dict[str, int] | None = None) -> dict:
    """The runs table, as an MLflow shared view: one row per trained method and
    seed (its evaluation's headline logged on it too: avg@k per set of
    `set_ks`, {set: its k}, and the evaluation's mean over every set, which
    unlike the report's keeps sets with no information), the method first; the
    pipeline's other stage runs (data, the evaluations, report) out of it, so
    the chart view holds the training curves alone. Flat, by method: MLflow
    folds child runs under their parent only when sorted by start time
    without a filter."""
    key, value = next(iter(ROW_TAG.items()))
    per_set = [f"metrics.`{headline_name(name, 'avg', k_set)}`" for name, k_set in (set_ks or {}).items()]
    columns = ["tags.`model`", "params.`seed`", "metrics.`train/reward_mean`", "metrics.`train/accuracy`", *per_set,
               *(f"metrics.`{headline_name('mean', kind, k)}`" for kind in HEADLINE_KINDS), "tags.`dvc_exp`"]
    return {"searchFilter": f"tags.{key} = '{value}'", "orderByKey": "tags.`model`", "orderByAsc": True,
            "selectedColumns": columns, "columnOrder": columns}


def runs_url(experiment_id: str, port: int = 5000, host: str = "127.0.0.1", chart: bool = False) -> str:
    """`mlflow ui`'s runs table in its model-training view (`chart`: its chart
    view, the per-step curves of the trainings side by side). MLflow 3.17 opens
    an experiment in its GenAI view unless the URL (or the browser's saved
    choice) says `workflowType=machine_learning`; the experimentKind tag is
    not read by this version's UI."""
    return (f"http://{host}:{port}/#/experiments/{experiment_id}/runs"
            f"?workflowType=machine_learning&viewStateShareKey={RUNS_VIEW}" + ("&compareRunsMode=CHART" * chart))


def experiment_tags(k: int, set_ks: dict[str, int] | None = None) -> dict[str, str]:
    return {**EXPERIMENT_KIND, f"mlflow.sharedViewState.{RUNS_VIEW}": json.dumps(runs_view(k, set_ks))}


def view_of(params) -> tuple[int, dict[str, int]]:
    """What the runs table shows of a params file: k, and each evaluated set's k."""
    return params.eval.k, {name: params.eval.k_for(name) for name in ("arithmetic", *params.data.benchmarks)}


MLFLOW_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID")


@contextmanager
def environment_kept(names):
    """The variables `names` as they were before the block."""
    before = {n: os.environ.get(n) for n in names}
    try:
        yield
    finally:
        for n, v in before.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


def repo_root() -> Path:
    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True)
        return Path(out.stdout.strip())
    except (subprocess.CalledProcessError, FileNotFoundError):
        return Path.cwd()


def project_root() -> Path:
    """The user's repository, also from a DVC experiment's temporary copy."""
    return Path(os.environ["DVC_ROOT"]) if os.environ.get("DVC_ROOT") else repo_root()


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def tracking_uri(configured: str = "") -> str:
    """$MLFLOW_TRACKING_URI, else the params value, else sqlite:///<project>/mlflow.db."""
    return os.environ.get("MLFLOW_TRACKING_URI") or configured or f"sqlite:///{project_root() / 'mlflow.db'}"


def experiment_name() -> str:
    return os.environ.get("DVC_EXP_NAME", "workspace")


def pipeline_key(params_file: str | Path = "params.yaml") -> str:
    """Names one pipeline execution: commit, params and DVC experiment."""
    path = Path(params_file)
    text = path.read_bytes() if path.exists() else b""
    return hashlib.sha256(git_commit().encode() + experiment_name().encode() + text).hexdigest()[:16]


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, f"{key}."))
        else:
            out[key] = str(v)[:500]
    return out


@dataclass(frozen=True)
class DatasetInput:
    name: str
    path: str
    digest: str
    context: str  # "train" | "eval"


def dataset_input(path: str | Path, context: str, name: str | None = None) -> DatasetInput:
    path = Path(path)
    return DatasetInput(name or path.stem, str(path), tree_md5(path)[:16], context)


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
        resume = resume if resume and _run_in(resume, exp_id) else None
        close_abandoned_runs(exp_id, self.stage, tags["dvc_exp"], keep=resume)
        process = {PROCESS_TAG: f"{socket.gethostname()}:{os.getpid()}"}
        if resume:
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

    def close(self, status: str = "FINISHED") -> None:
        if self.run_id is not None:
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


def latest_run(exp_id: str, stage: str, dvc_exp: str) -> str | None:
    """The latest run of `stage`, of this DVC experiment if it has one."""
    from mlflow.tracking import MlflowClient

    for extra in (f" and tags.dvc_exp = '{dvc_exp}'", ""):
        found = MlflowClient().search_runs([exp_id], filter_string=f"tags.stage = '{stage}'{extra}", max_results=1,
                                           order_by=["attributes.start_time DESC"])
        if found:
            return found[0].info.run_id
    return None


def _run_in(run_id: str, exp_id: str) -> bool:
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient().get_run(run_id).info.experiment_id == exp_id
    except MlflowException:
        return False  # another store (a moved or deleted mlflow.db): the training gets a new run


def close_abandoned_runs(exp_id: str, stage: str, dvc_exp: str, keep: str | None = None) -> list[str]:
    """Mark KILLED the runs of `stage` left RUNNING by a process of this host
    that no longer exists (a kill -9, a lost node), tagging their last step."""
    from mlflow.tracking import MlflowClient

    client, host, closed = MlflowClient(), socket.gethostname(), []
    running = client.search_runs([exp_id], filter_string=f"tags.stage = '{stage}' and attributes.status = 'RUNNING'"
                                 f" and tags.dvc_exp = '{dvc_exp}'")
    for run in running:
        owner = run.data.tags.get(PROCESS_TAG, "")
        owner_host, _, pid = owner.rpartition(":")
        if run.info.run_id == keep or owner_host != host or (pid.isdigit() and _alive(int(pid))):
            continue
        steps = [m.step for key in list(run.data.metrics)[:1] for m in client.get_metric_history(run.info.run_id, key)]
        client.set_tag(run.info.run_id, "rlvr.ended", f"killed: its process {owner} was gone; last step "
                       f"{max(steps) if steps else 'none'}")
        client.set_terminated(run.info.run_id, "KILLED")
        closed.append(run.info.run_id)
    return closed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def artifact_location(uri: str) -> str:
    """Where a store's artifacts go: mlartifacts/ beside a sqlite store's file
    (so a copied repository writes into its own copy), else beside the project."""
    db = sqlite_path(uri)
    return ((db.parent if db else project_root()) / "mlartifacts").as_uri()


def sqlite_path(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")).resolve() if uri.startswith("sqlite:///") else None


def relocate_artifacts(uri: str, exp, location: str) -> None:
    """A sqlite store copied with its repository still points its artifacts at
    the original's mlartifacts/; point them at the copy's (experiment and runs)."""
    db, old = sqlite_path(uri), exp.artifact_location
    if db is None or old == location or not (old.startswith("file://") and old.rstrip("/").endswith("/mlartifacts")):
        return
    import sqlite3

    with sqlite3.connect(db) as con:
        con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?", (location, exp.experiment_id))
        con.execute("UPDATE runs SET artifact_uri = ? || substr(artifact_uri, ?) WHERE experiment_id = ? "
                    "AND artifact_uri LIKE ? || '%'", (location, len(old) + 1, exp.experiment_id, old))
    print(f"[tracking] {db} was made at another path: its artifacts now go to {location}, not {old}", flush=True)


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


if __name__ == "__main__":  # as before rlvr.ui: the training view's URLs, for a server already running
    import sys

    from rlvr.cli import tool
    from rlvr.ui import main

    tool(lambda: main(["--print", *sys.argv[1:]]))
