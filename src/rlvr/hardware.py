"""What the machine's matrix units make fast: bf16 or fp32.

On CPUs without bf16 units (AVX2-only), bf16 matmuls are emulated and run
several times slower than fp32; on CPUs with AVX512-BF16 or AMX, and on CUDA,
bf16 is the faster choice. `auto` in params.yaml resolves through here.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

BF16_CPU_FLAGS = {"avx512_bf16", "amx_bf16"}


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text() if path.exists() else ""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


@lru_cache(maxsize=1)
def has_fast_bf16() -> bool:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return bool(cpu_flags() & BF16_CPU_FLAGS)


def preferred_dtype() -> str:
    return "bfloat16" if has_fast_bf16() else "float32"
