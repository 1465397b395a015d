"""Row blocks of [M, V] logits for the vocabulary-wide kernels (log p, the
entropies): one reused float32 buffer, so a block stays in cache and no
full-vocabulary float32 tensor is materialized."""

from __future__ import annotations

import torch

# Rows of a [rows, V] float32 block handled at once by the vocabulary-wide
# kernels below: ~12 MiB for a 49k vocabulary, so a block stays in cache.
CHUNK_ROWS = 64


def compute_dtype(logits: torch.Tensor) -> torch.dtype:
    return torch.promote_types(logits.dtype, torch.float32)  # bf16 -> fp32; fp64 stays


class LogitBlocks:
    """Row blocks of [M, V] logits, each copied into one reused float32 buffer
    and divided by the temperature. Reusing the buffer matters on CPU: a fresh
    12 MiB allocation per block costs page faults that cost more than the math."""

    def __init__(self, logits: torch.Tensor, temperature: float):
        self.logits, self.temperature = logits, temperature
        rows = min(CHUNK_ROWS, logits.shape[0])
        self.buffer = torch.empty((rows, logits.shape[1]), dtype=compute_dtype(logits), device=logits.device)

    def __iter__(self):
        for i in range(0, self.logits.shape[0], CHUNK_ROWS):
            s = slice(i, min(i + CHUNK_ROWS, self.logits.shape[0]))
            z = self.buffer[: s.stop - s.start]
            yield s, z.copy_(self.logits[s]).div_(self.temperature)
