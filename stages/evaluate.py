"""DVC stage: evaluate the base model (evaluate_base), a released checkpoint
(evaluate_checkpoint@<name>) or a trained run (evaluate@<method>-<seed>)."""

import argparse
import sys

from rlvr.cli import params_or_exit, stage_timer
from rlvr.config import ConfigError
from rlvr.evaluation import evaluate_stage
from rlvr.launch import relaunch
from rlvr.runs import BASE, Run

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--method", help="'base' or a method name")
    which.add_argument("--checkpoint", help="a name under `checkpoints:` (a released model, evaluated as a row)")
    ap.add_argument("--seed", type=int, default=None, help="the trained run's seed (default: the first of `seeds`)")
    args = ap.parse_args()
    params = params_or_exit()
    try:
        relaunch(params)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if args.checkpoint is not None:
        run = Run(args.checkpoint, external=True)
    else:
        run = Run(args.method, None if args.method == BASE else (params.seeds[0] if args.seed is None else args.seed))
    with stage_timer(f"evaluate@{run.name}") as summary:
        summary.update(evaluate_stage(params, run))
