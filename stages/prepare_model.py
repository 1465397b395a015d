"""DVC stage: the base model as a safetensors checkpoint in models/base."""

import dataclasses

from rlvr.cli import stage_timer
from rlvr.model import materialize
from rlvr.settings.load import params_or_exit
from rlvr.tracking.tracker import Tracker

if __name__ == "__main__":
    params = params_or_exit()
    with stage_timer("prepare_model") as summary, \
            Tracker.for_stage(params, "prepare_model", model="base",
                              logged={"model": dataclasses.asdict(params.model)}, system_metrics=False) as tracker:
        summary["path"] = materialize(params.model.source, params.model.out_dir, params.model.dtype)
        summary["source"] = params.model.source
        tracker.log_model(params.model.out_dir, name="base")
