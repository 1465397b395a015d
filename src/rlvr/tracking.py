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
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

from rlvr.digests import tree_md5

EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}  # a model-training experiment
PIPELINE_KEY = "rlvr.pipeline"
RUNS_VIEW = "runs"  # the shared view the runs-table URL opens (experiment tag mlflow.sharedViewState.<this>)


def runs_view(k: int) -> dict:
    """The runs table a trainer compares, as an MLflow shared view: flat (MLflow
    folds stage runs under their pipeline run only when sorted by start time
    without a filter; the filter also leaves the pipeline runs out), by run
    name (evaluate@..., train@...), with the method, seed, experiment, final
    training reward and accuracy, and the evaluation's headline metrics."""
    return {"searchFilter": "tags.stage LIKE '%'", "orderByKey": "tags.`mlflow.runName`", "orderByAsc": True,
            "selectedColumns": ["tags.`model`", "params.`seed`", "tags.`dvc_exp`", "metrics.`reward_mean`",
                                "metrics.`accuracy`", f"metrics.`mean/avg_at_{k}`", f"metrics.`mean/maj_at_{k}`"]}


def runs_url(experiment_id: str, port: int = 5000, host: str = "127.0.0.1") -> str:
    """`mlflow ui`'s runs table in its model-training view. MLflow 3.17 opens
    an experiment in its GenAI view unless the URL (or the browser's saved
    choice) says `workflowType=machine_learning`; the experimentKind tag is
    not read by this version's UI."""
    return (f"http://{host}:{port}/#/experiments/{experiment_id}/runs"
            f"?workflowType=machine_learning&viewStateShareKey={RUNS_VIEW}")


def experiment_tags(k: int) -> dict[str, str]:
    return {**EXPERIMENT_KIND, f"mlflow.sharedViewState.{RUNS_VIEW}": json.dumps(runs_view(k))}


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
    """An MLflow run that degrades to a no-op (with one warning) on store errors."""

    def __init__(self, stage: str, experiment: str = "rlvr", uri: str = "", model: str = "",
                 params: dict | None = None, run_name: str | None = None, system_metrics: bool = False,
                 k: int = 4):
        self.stage, self.enabled, self.run_id, self._k = stage, True, None, k
        self._guard(self._start, experiment, tracking_uri(uri), stage, model, run_name, system_metrics)
        if params:
            self.log_params(params)

    @classmethod
    def for_stage(cls, params, stage: str, model: str = "", logged: dict | None = None,
                  system_metrics: bool = True) -> "Tracker":
        """A stage's run in the store and experiment `params.tracking` names."""
        return cls(stage, params.tracking.experiment, params.tracking.uri, model=model, params=logged,
                   system_metrics=system_metrics, k=params.eval.k)

    def _start(self, experiment, uri, stage, model, run_name, system_metrics):
        import mlflow

        self._mlflow = mlflow
        mlflow.set_tracking_uri(uri)
        exp = mlflow.get_experiment_by_name(experiment)
        # Artifacts beside the store, not in whatever directory the stage runs from.
        exp_id = exp.experiment_id if exp else mlflow.create_experiment(
            experiment, artifact_location=(project_root() / "mlartifacts").as_uri())
        mlflow.set_experiment(experiment_id=exp_id)
        for key, value in experiment_tags(self._k).items():
            mlflow.set_experiment_tag(key, value)
        tags = {"stage": stage, "model": model, "git_commit": git_commit(), "dvc_exp": experiment_name()}
        parent = self._parent_run(exp_id, tags)
        run = mlflow.start_run(run_name=run_name or stage, tags=tags, parent_run_id=parent,
                               log_system_metrics=system_metrics)
        self.run_id = run.info.run_id

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
        items = list(flatten(params).items())
        for i in range(0, len(items), 100):  # MLflow caps a batch at 100 params
            self._guard(lambda chunk: self._mlflow.log_params(dict(chunk)), items[i : i + 100])

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        clean = {k.replace("@", "_at_"): float(v) for k, v in metrics.items() if v is not None}
        self._guard(lambda: self._mlflow.log_metrics(clean, step=step))

    def log_table(self, rows: list[dict], artifact_file: str) -> None:
        if not rows:
            return
        columns = {k: [r.get(k) for r in rows] for k in rows[0]}
        self._guard(lambda: self._mlflow.log_table(data=columns, artifact_file=artifact_file))

    def log_dataset(self, ds: DatasetInput) -> None:
        """A dataset as an MLflow input: its name, path and content digest (no copy)."""
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
        self._guard(lambda: self._mlflow.end_run(status=status))
        self.enabled = False

    def __enter__(self) -> "Tracker":
        return self

    def __exit__(self, exc_type, *rest) -> None:
        self.close("FAILED" if exc_type else "FINISHED")


class NullTracker:
    """What ranks other than 0 (and runs without a store) track: nothing, with
    Tracker's methods, so callers never ask whether they have a tracker."""

    enabled, run_id = False, None

    def __getattr__(self, name):
        return lambda *args, **kwargs: None

    def __enter__(self) -> "NullTracker":
        return self

    def __exit__(self, *exc) -> None:
        pass


def main(argv=None) -> int:
    """Print the runs table's URL for `mlflow ui` (setting the experiment's view first)."""
    import argparse

    from mlflow.tracking import MlflowClient

    from rlvr.params import load_params

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--port", type=int, default=5000)
    args = ap.parse_args(argv)
    params = load_params(args.params)
    client = MlflowClient(tracking_uri(params.tracking.uri))
    exp = client.get_experiment_by_name(params.tracking.experiment)
    if exp is None:
        print(f"no experiment '{params.tracking.experiment}' in the store yet: run `dvc repro` first")
        return 1
    for key, value in experiment_tags(params.eval.k).items():
        client.set_experiment_tag(exp.experiment_id, key, value)
    print(runs_url(exp.experiment_id, args.port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
