"""MLflow's names for what we log: the tags that find a run, the sections a
run's charts fall in, and an evaluation's headline metrics."""

from __future__ import annotations

EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}  # a model-training experiment
PIPELINE_KEY = "rlvr.pipeline"
PROCESS_TAG = "rlvr.process"  # host:pid of the process a run belongs to
ROW_TAG = {"table": "model"}  # the runs the table shows: one per trained method and seed
# steps.csv columns charted first (section "train"); the rest go to "train details", validation to "val".
# MLflow sections a run's charts by the text before the last '/', in code-unit order, "Model metrics"
# (names without '/': the evaluation's headline) and "System metrics" last.
KEY_CURVES = ("reward_mean", "accuracy", "entropy", "response_length", "kl", "loss")
HEADLINE_KINDS = ("avg", "maj", "pass")
OVER_RUN = " over the run"  # a key curve's mean over every step, logged once a training ends (the runs table)


STEP_PREFIXES = ("train/", "train details/", "val/")  # every per-step key step_metric_key gives


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


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, f"{key}."))
        else:
            out[key] = str(v)[:500]
    return out
