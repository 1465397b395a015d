"""DVC stage: build and normalize every dataset into data/prepared/{train,eval}."""

import dataclasses

from rlvr.cli import stage_timer
from rlvr.data.prepare import prepare
from rlvr.settings.datasets import local_entries
from rlvr.settings.load import params_or_exit
from rlvr.tracking.provenance import dataset_input
from rlvr.tracking.tracker import Tracker


def prompt_tokenizer(params):
    """The base model's tokenizer (models/base), which measures prompts for data.max_prompt_tokens."""
    if params.data.max_prompt_tokens is None:
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(params.model.out_dir)


if __name__ == "__main__":
    params = params_or_exit()
    with stage_timer("prepare_data") as summary, \
            Tracker.for_stage(params, "prepare_data", logged={"data": dataclasses.asdict(params.data),
                                                          "prompt": dataclasses.asdict(params.prompt.for_training())},
                              system_metrics=False) as tracker:
        counts = prepare(params.data, params.prompt.for_training(), prompt_tokenizer(params))
        summary.update(counts)
        tracker.log_metrics({f"rows/{k}": v for k, v in counts.items()})
        for path in sorted(params.data.eval_dir.glob("*.jsonl")) + [params.data.train_dir / "train.jsonl"]:
            tracker.log_dataset(dataset_input(path, "train" if path.parent == params.data.train_dir else "eval"))
        for role, entry in local_entries(params.data):  # a params entry's own file, as read
            tracker.log_dataset(dataset_input(entry.path, f"{role} source", entry.name))
