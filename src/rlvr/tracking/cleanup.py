"""Housekeeping of the store: runs a killed process left RUNNING, the latest
run of a stage, and a copied store's artifact paths."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from rlvr.tracking.names import PROCESS_TAG
from rlvr.tracking.provenance import project_root


def latest_run(exp_id: str, stage: str, dvc_exp: str) -> str | None:
    """The latest run of `stage`, of this DVC experiment if it has one."""
    from mlflow.tracking import MlflowClient

    for extra in (f" and tags.dvc_exp = '{dvc_exp}'", ""):
        found = MlflowClient().search_runs([exp_id], filter_string=f"tags.stage = '{stage}'{extra}", max_results=1,
                                           order_by=["attributes.start_time DESC"])
        if found:
            return found[0].info.run_id
    return None


def run_in(run_id: str, exp_id: str) -> bool:
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


def drop_metric_steps(store, run_id: str, step: int, prefixes: tuple[str, ...]) -> int:
    """Delete run `run_id`'s metric values of steps after `step` whose keys start with one of
    `prefixes` (a SqlAlchemyStore: MLflow has no call for it), and point each such key's latest
    value at what remains. Returns the values deleted."""
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric
    from sqlalchemy import or_

    keyed = or_(*(SqlMetric.key.startswith(p) for p in prefixes))
    with store.ManagedSessionMaker(read_only=False) as session:
        later = session.query(SqlMetric).filter(SqlMetric.run_uuid == run_id, SqlMetric.step > step, keyed)
        keys = {m.key for m in later}
        dropped = later.delete(synchronize_session=False)
        for key in keys:
            session.query(SqlLatestMetric).filter(SqlLatestMetric.run_uuid == run_id,
                                                  SqlLatestMetric.key == key).delete(synchronize_session=False)
            last = (session.query(SqlMetric).filter(SqlMetric.run_uuid == run_id, SqlMetric.key == key)
                    .order_by(SqlMetric.step.desc(), SqlMetric.timestamp.desc(), SqlMetric.value.desc()).first())
            if last is not None:
                session.add(SqlLatestMetric(key=key, value=last.value, timestamp=last.timestamp, step=last.step,
                                            is_nan=last.is_nan, run_uuid=run_id))
    return dropped
