"""DVC stage: RL-train one method (train@<method>), resuming from its checkpoint."""

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from rlvr.cli import params_or_exit, stage_timer
from rlvr.config import ConfigError, method_config
from rlvr.tracking import Tracker
from rlvr.trainer import Trainer, TrainingStopped

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--method", required=True)
    ap.add_argument("--model", default="models/base", help="initial checkpoint")
    args = ap.parse_args()
    params = params_or_exit()
    try:
        method = method_config(params, args.method)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    with stage_timer(f"train@{args.method}") as summary:
        tracked = {"train": dataclasses.asdict(method.train), "objective": dataclasses.asdict(method.objective)}
        with Tracker(f"train@{args.method}", params.tracking.experiment, params.tracking.uri,
                     model=args.method, params=tracked) as tracker:
            trainer = Trainer(params, method, args.model, f"runs/{args.method}", f"models/{args.method}", tracker)
            try:
                trainer.train()
            except TrainingStopped as e:
                print(f"error: {e}", file=sys.stderr)
                sys.exit(3)
            tracker.log_artifact(trainer.steps_file)
        rows = trainer.history()  # all steps, also those of an earlier, resumed invocation
        last = rows[-1] if rows else {}
        out = {"steps": method.train.steps, "final": last, "first": rows[0] if rows else None}
        path = Path(f"reports/train/{args.method}/summary.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=2))
        summary.update({k: round(last[k], 3) for k in ("reward_mean", "entropy", "kl", "time_total") if k in last})
