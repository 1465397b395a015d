"""DVC stage: evaluate one checkpoint (the base model or a trained method)."""

import argparse
import dataclasses

from rlvr.cli import params_or_exit, stage_timer
from rlvr.evaluation import flat_metrics, run_evaluation
from rlvr.tracking import Tracker

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--run", required=True, help="run name: 'base' or a method name")
    ap.add_argument("--model", required=True, help="checkpoint directory")
    ap.add_argument("--out", required=True, help="output directory for metrics.json and samples.jsonl")
    args = ap.parse_args()
    params = params_or_exit()
    with stage_timer(f"evaluate@{args.run}") as summary:
        tracked = {"eval": dataclasses.asdict(params.eval), "engine": dataclasses.asdict(params.engine),
                   "benchmarks": params.data.benchmarks, "run": args.run, "model_path": args.model}
        with Tracker(f"evaluate@{args.run}", params.tracking.experiment, params.tracking.uri,
                     model=args.run, params=tracked) as tracker:
            result = run_evaluation(args.model, params, args.out)
            tracker.log_metrics(flat_metrics(result["metrics"]))
            tracker.log_table(result["rows"][: params.tracking.log_samples], "samples.json")
            tracker.log_artifact(f"{args.out}/metrics.json")
        m = result["metrics"]
        summary.update({k: round(v, 3) for k, v in m["mean"].items() if "@" in k})
        summary["tok/s"] = m["generation"]["tokens_per_s"]
