"""Imported by every Python process of a test's stage (it is on PYTHONPATH):
in a process running stages/train.py, with RLVR_PROBE=<phase>:<step>:<dir>,
that step's phase (grading or update) writes <dir>/<phase>-rank<RANK> when it
starts and waits HOLD_S before going on, so that a test can send its signal
in the middle of that phase."""

import os
import sys
import time
from pathlib import Path

HOLD_S = 4.0

PROBE = os.environ.get("RLVR_PROBE")
if PROBE and any(a.endswith("stages/train.py") for a in sys.orig_argv):
    from rlvr.grading import pool
    from rlvr.training import trainer, update

    phase, at_step, where = PROBE.split(":", 2)
    current = {"step": None}

    def _holding(name, fn):
        def wrapped(*args, **kwargs):
            if name == phase and current["step"] == int(at_step) - 1:
                Path(where, f"{name}-rank{os.environ.get('RANK', '0')}").touch()
                time.sleep(HOLD_S)
            return fn(*args, **kwargs)
        return wrapped

    def _tracking_step(fn):
        def wrapped(self, step, *args, **kwargs):
            current["step"] = step
            try:
                return fn(self, step, *args, **kwargs)
            finally:
                current["step"] = None
        return wrapped

    trainer.Trainer.step = _tracking_step(trainer.Trainer.step)
    pool.Verifier.grade = _holding("grading", pool.Verifier.grade)
    update.PolicyUpdate.run = _holding("update", update.PolicyUpdate.run)
