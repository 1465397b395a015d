"""The sizes of the training's fixed GPU buffers: what the trainer allocates and the
memory budget (rlvr.tools.memory, which check_params runs) counts, in one place below
both, so checking a params file imports no training code."""

REDUCE_BUCKET = 200_000_000  # elements: DeepSpeed's reduce / all-gather bucket size (the budget counts two)
HEAD_BLOCK_LOGITS = 1 << 27  # float32 logits per LM-head row block on a GPU: 512 MiB
