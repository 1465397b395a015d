"""The runs table as MLflow opens it: its shared view (one row per trained
method and seed, the headline beside it) and the URLs into it."""

from __future__ import annotations

import json

from rlvr.tracking.names import EXPERIMENT_KIND, HEADLINE_KINDS, OVER_RUN, ROW_TAG, headline_name

RUNS_VIEW = "runs"  # the shared view the runs-table URL opens (experiment tag mlflow.sharedViewState.<this>)


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
    columns = ["tags.`model`", "params.`seed`", f"metrics.`train/reward_mean{OVER_RUN}`",
               f"metrics.`train/accuracy{OVER_RUN}`", *per_set,
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
    return params.eval.k, {name: params.eval.k_for(name) for name in ("arithmetic", *params.data.benchmark_names)}
