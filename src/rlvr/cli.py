"""What every stage script and `rlvr <tool>` shares: params loading
with readable errors."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Callable, NoReturn

from rlvr.schema import ConfigError
from rlvr.stopping import EXIT_CONFIG, EXIT_STOPPED


@contextmanager
def exit_on_config_error():
    """A ConfigError inside ends the stage with its message and exit status 2 (no traceback)."""
    try:
        yield
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        restore_hint()
        sys.exit(EXIT_CONFIG)


def restore_hint() -> None:
    """Under `dvc repro`, DVC removed the failed stage's earlier outputs before
    running it: say how to get them back."""
    stage = os.environ.get("DVC_STAGE")
    if stage:
        print(f"note: DVC removed {stage}'s earlier outputs before running it; `dvc checkout --force {stage}` "
              "restores them from the cache", file=sys.stderr, flush=True)


@contextmanager
def stage_timer(name: str):
    """Prints the stage's one-line summary with its wall time (rank 0 only)."""
    t0 = time.perf_counter()
    summary: dict = {}
    try:
        yield summary
    except BaseException as e:
        if not (isinstance(e, SystemExit) and e.code in (0, None, EXIT_STOPPED)):
            restore_hint()  # a stopped training's rerun resumes it: no restore to suggest
        raise
    if os.environ.get("RANK", "0") != "0":
        return
    parts = ", ".join(f"{k}={v}" for k, v in summary.items())
    print(f"[{name}] done in {time.perf_counter() - t0:.1f}s" + (f": {parts}" if parts else ""), flush=True)


def tool(main: Callable[[], int]) -> NoReturn:
    """The entry of an `rlvr <tool>`: its exit status, and bad input (a
    params problem, a file that is not there) as `error: ...` on stderr with exit
    status 2, never a traceback."""
    try:
        code = main()
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:
        print(f"error: {e.strerror or e}: {e.filename}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    sys.exit(code)
