"""DVC stage: the base model as a safetensors checkpoint in models/base."""

from rlvr.cli import params_or_exit, stage_timer
from rlvr.model import materialize

if __name__ == "__main__":
    params = params_or_exit()
    with stage_timer("prepare_model") as summary:
        summary["path"] = materialize(params.model.source, params.model.out_dir, params.model.dtype)
        summary["source"] = params.model.source
