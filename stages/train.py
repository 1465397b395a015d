"""DVC stage: RL-train one method with one seed (train@<method>-<seed>), resuming from its checkpoint."""

import argparse
import dataclasses

from rlvr.cli import exit_on_config_error, stage_timer
from rlvr.runs import Run
from rlvr.settings.load import params_or_exit
from rlvr.settings.methods import check_methods, method_config
from rlvr.tools.memory import check_this_gpu
from rlvr.training.launch import relaunch
from rlvr.training.stage import run_training

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--method", required=True)
    ap.add_argument("--seed", type=int, default=None, help="the run's seed (default: the first of `seeds`)")
    ap.add_argument("--model", default="models/base", help="initial checkpoint")
    ap.add_argument("--fresh", action="store_true",
                    help="start over when the run's checkpoint was made from other inputs (dvc repro does)")
    args = ap.parse_args()
    params = params_or_exit()
    with exit_on_config_error():
        # every method built once, so a typo in the next one stops this one too
        method = check_methods(params).get(args.method) or method_config(params, args.method)  # (unknown: its error)
        check_this_gpu(params, method)  # before the ranks start: a recipe that cannot fit stops here
        relaunch(params)
    run = Run(args.method, params.seeds[0] if args.seed is None else args.seed)
    method = dataclasses.replace(method, train=dataclasses.replace(method.train, seed=run.seed))
    with stage_timer(f"train@{run.name}") as summary:
        summary.update(run_training(params, method, run, args.model, fresh=args.fresh))
