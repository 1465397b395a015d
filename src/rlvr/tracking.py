"""MLflow tracking: one run per stage execution, in an explicit sqlite store.

Tracking must never cost a result: if the store is locked or unreachable the
stage goes on, metrics still reach the local files, and a warning says so.
"""

from __future__ import annotations

import os
import subprocess
import warnings
from pathlib import Path


def repo_root() -> Path:
    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True)
        return Path(out.stdout.strip())
    except (subprocess.CalledProcessError, FileNotFoundError):
        return Path.cwd()


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def tracking_uri(configured: str = "") -> str:
    """$MLFLOW_TRACKING_URI, else the params value, else sqlite:///<repo>/mlflow.db."""
    return os.environ.get("MLFLOW_TRACKING_URI") or configured or f"sqlite:///{repo_root() / 'mlflow.db'}"


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, f"{key}."))
        else:
            out[key] = str(v)[:500]
    return out


class Tracker:
    """An MLflow run that degrades to a no-op (with one warning) on store errors."""

    def __init__(self, stage: str, experiment: str = "rlvr", uri: str = "", model: str = "",
                 params: dict | None = None, run_name: str | None = None):
        self.stage, self.enabled, self.run_id = stage, True, None
        self._guard(self._start, experiment, tracking_uri(uri), stage, model, run_name)
        if params:
            self.log_params(params)

    def _start(self, experiment, uri, stage, model, run_name):
        import mlflow

        self._mlflow = mlflow
        mlflow.set_tracking_uri(uri)
        if mlflow.get_experiment_by_name(experiment) is None:
            # Artifacts beside the store, not in whatever directory the stage runs from.
            mlflow.create_experiment(experiment, artifact_location=(repo_root() / "mlartifacts").as_uri())
        mlflow.set_experiment(experiment)
        tags = {
            "stage": stage,
            "model": model,
            "git_commit": git_commit(),
            "dvc_exp": os.environ.get("DVC_EXP_NAME", "workspace"),
        }
        run = mlflow.start_run(run_name=run_name or stage, tags=tags)
        self.run_id = run.info.run_id

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
        flat = flatten(params)
        items = list(flat.items())
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
