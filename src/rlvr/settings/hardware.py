"""What the machine's matrix units make fast: bf16 or fp32.

On CPUs without bf16 units (AVX2-only), bf16 matmuls are emulated and run
several times slower than fp32; on CPUs with AVX512-BF16 or AMX, and on CUDA,
bf16 is the faster choice. `auto` in params.yaml resolves through here.

oneDNN's own ISA cap, `ONEDNN_MAX_CPU_ISA`, is honoured: capped below
AVX512_CORE_BF16 (e.g. `AVX2`), the bf16 units are out of oneDNN's reach, so
`auto` picks fp32, as on a CPU without them.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

BF16_CPU_FLAGS = {"avx512_bf16", "amx_bf16"}
# oneDNN ISA names, lowest first (oneDNN's cpu_isa_t); bf16 compute starts at AVX512_CORE_BF16.
ONEDNN_ISAS = ["SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI",
               "AVX512_CORE_BF16", "AVX10_1_512", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX10_1_512_AMX",
               "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX_FP16", "AVX10_2_512", "AVX10_2_512_AMX_2", "DEFAULT"]


def isa_allows_bf16(cap: str | None) -> bool:
    """Whether oneDNN capped at `cap` (None: no cap) may use bf16 units."""
    if not cap:
        return True
    name = cap.upper()
    if name not in ONEDNN_ISAS:
        raise ValueError(f"ONEDNN_MAX_CPU_ISA={cap!r} is not a oneDNN ISA; use one of {', '.join(ONEDNN_ISAS)}")
    return ONEDNN_ISAS.index(name) >= ONEDNN_ISAS.index("AVX512_CORE_BF16")


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
    return bool(cpu_flags() & BF16_CPU_FLAGS) and isa_allows_bf16(os.environ.get("ONEDNN_MAX_CPU_ISA"))


def preferred_dtype() -> str:
    return "bfloat16" if has_fast_bf16() else "float32"
