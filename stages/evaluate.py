"""DVC stage: evaluate the base model (evaluate_base), a released checkpoint
(evaluate_checkpoint@<name>) or a trained run (evaluate@<method>-<seed>)."""

import argparse

from rlvr.cli import exit_on_config_error, stage_timer
from rlvr.evaluation.evaluator import evaluate_stage
from rlvr.runs import BASE, Run
from rlvr.settings.load import params_or_exit
from rlvr.training.launch import relaunch

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--method", help="'base' or a method name")
    which.add_argument("--checkpoint", help="a name under `checkpoints:` (a released model, evaluated as a row)")
    ap.add_argument("--seed", type=int, default=None, help="the trained run's seed (default: the first of `seeds`)")
    args = ap.parse_args()
    params = params_or_exit()
    with exit_on_config_error():
        relaunch(params)
    if args.checkpoint is not None:
        run = Run(args.checkpoint, external=True)
    else:
        run = Run(args.method, None if args.method == BASE else (params.seeds[0] if args.seed is None else args.seed))
    with stage_timer(f"evaluate@{run.name}") as summary:
        summary.update(evaluate_stage(params, run))
