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
    running it: say how to get each back (the cached ones from DVC's cache, the
    uncached ones, git-tracked, from git)."""
    stage = os.environ.get("DVC_STAGE")
    if not stage:
        return
    cached, uncached = removed_outputs(stage)
    ways = [f"`dvc checkout --force {stage}` restores {', '.join(cached) or 'them'} from the cache"] \
        if cached or not uncached else []
    if uncached:
        ways.append(f"{', '.join(uncached)} (cache: false) {'is' if len(uncached) == 1 else 'are'} not in the cache: "
                    f"`git checkout -- {' '.join(uncached)}` brings back the committed version")
    print(f"note: DVC removed {stage}'s earlier outputs before running it; " + "; ".join(ways), file=sys.stderr,
          flush=True)


def removed_outputs(stage: str) -> tuple[list[str], list[str]]:
    """(cached, uncached) outputs of `stage` that DVC removes before running it (persistent ones
    it keeps); ([], []) where DVC cannot say."""
    try:
        from dvc.repo import Repo

        with Repo(os.environ.get("DVC_ROOT", ".")) as repo:
            outs = [o for s in repo.stage.collect(stage) for o in s.outs if not o.persist]
    except Exception:  # noqa: BLE001  only the hint's detail is lost
        return [], []
    return [o.def_path for o in outs if o.use_cache], [o.def_path for o in outs if not o.use_cache]


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
