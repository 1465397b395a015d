"""Per-GPU memory of a training step's phases, as the device reports it.

vLLM allocates outside PyTorch's caching allocator (its KV cache, and its
weights under sleep mode), so the rollout is read from the device's free
memory; the update's peak is the device's use when it starts plus PyTorch's
peak above what it held then. Nothing is measured without CUDA.
"""

from __future__ import annotations

import torch

GIB = 1 << 30


class PhaseMemory:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device
        self.gib: dict[str, float] = {}
        self._base = (0, 0)

    def _used(self) -> int:
        free, total = torch.cuda.mem_get_info(self.device)
        return total - free

    def rollout_done(self) -> None:
        """After the rollout, before the engine sleeps: vLLM's share is still held."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
            self.gib["gpu_rollout_gib"] = self._used() / GIB

    def update_starts(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = (self._used(), torch.cuda.memory_allocated(self.device))

    def update_done(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            used, allocated = self._base
            self.gib["gpu_update_gib"] = (used + torch.cuda.max_memory_allocated(self.device) - allocated) / GIB
