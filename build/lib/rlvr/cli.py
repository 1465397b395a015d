"""What every stage script shares: params loading with readable errors."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager

from rlvr.config import ConfigError, Params
from rlvr.params import load_params


def params_or_exit(path: str = "params.yaml") -> Params:
    try:
        return load_params(path)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


@contextmanager
def stage_timer(name: str):
    """Prints the stage's one-line summary with its wall time (rank 0 only)."""
    t0 = time.perf_counter()
    summary: dict = {}
    yield summary
    if os.environ.get("RANK", "0") != "0":
        return
    parts = ", ".join(f"{k}={v}" for k, v in summary.items())
    print(f"[{name}] done in {time.perf_counter() - t0:.1f}s" + (f": {parts}" if parts else ""), flush=True)
