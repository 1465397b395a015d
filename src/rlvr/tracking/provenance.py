"""Where a run comes from: the store's path, the git commit, the DVC
experiment, the pipeline execution, and the digests of its datasets."""

from __future__ import annotations

import hashlib
import os
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rlvr.digests import tree_md5

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


@dataclass(frozen=True)
class DatasetInput:
    name: str
    path: str
    digest: str
    context: str  # "train" | "eval"


def dataset_input(path: str | Path, context: str, name: str | None = None) -> DatasetInput:
    path = Path(path)
    return DatasetInput(name or path.stem, str(path), tree_md5(path)[:16], context)
