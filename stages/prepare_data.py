"""DVC stage: build and normalize every dataset into data/prepared/."""

from rlvr.cli import params_or_exit, stage_timer
from rlvr.data.prepare import prepare

if __name__ == "__main__":
    params = params_or_exit()
    with stage_timer("prepare_data") as summary:
        summary.update(prepare(params.data))
