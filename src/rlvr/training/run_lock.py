"""One trainer per run directory.

Rank 0 of a training holds an exclusive lock on `<run_dir>/trainer.lock`
(fcntl.flock: the kernel releases it when the process ends, however it ends)
and writes in it who holds it. A second trainer of the same run finds it held:

- by a trainer that is stopping (a SIGTERM to `dvc repro`'s group ends DVC at
  once while its trainer finishes the step and checkpoints it), it waits for
  that trainer to exit, then resumes from the checkpoint it wrote;
- by a trainer that is not, it refuses, naming the holder's pid and host.

So steps.csv and MLflow never get the same step from two trainers."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from rlvr import distributed

LOCK = "trainer.lock"


class RunLocked(RuntimeError):
    """Another trainer, not stopping, is training this run."""


def _try_lock(file) -> bool:
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


class RunLock:
    def __init__(self, run_dir: str | Path, say=print, wait_s: float = 1800.0, poll_s: float = 1.0):
        """`wait_s`: how long to wait for a stopping holder before refusing."""
        self.path = Path(run_dir) / LOCK
        self.say, self.wait_s, self.poll_s = say, wait_s, poll_s
        self._file = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        file = open(self.path, "a+")
        deadline, told = time.monotonic() + self.wait_s, False
        while not _try_lock(file):
            holder = self.holder()
            if not holder.get("stopping") or time.monotonic() > deadline:
                file.close()
                raise RunLocked(f"{self.path.parent} is being trained by pid {holder.get('pid', '?')} on "
                                f"{holder.get('host', '?')} (since {holder.get('since', '?')}): wait for it to end, "
                                f"or stop it (kill -TERM {holder.get('pid', '<pid>')}) and rerun to resume")
            if not told:
                self.say(f"an earlier trainer of this run (pid {holder.get('pid')}) is stopping: waiting for it to "
                         "finish its step and checkpoint, then resuming from there")
                told = True
            time.sleep(self.poll_s)
        self._file = file
        self._write({"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S"),
                     "stopping": False})

    @property
    def held(self) -> bool:
        return self._file is not None

    def holder(self) -> dict:
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def stopping(self) -> None:
        """Say in the lock that this trainer is stopping: a new trainer waits for it."""
        if self._file is not None:
            self._write({**self.holder(), "stopping": True})

    def _write(self, info: dict) -> None:
        self._file.seek(0)
        self._file.truncate()
        self._file.write(json.dumps(info))
        self._file.flush()

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def hold(lock: RunLock, ranks: distributed.Ranks) -> None:
    """Rank 0 takes the lock (waiting for a stopping holder); every rank raises
    RunLocked together when it could not, so none waits on a collective."""
    refused = None
    if ranks.main:
        try:
            lock.acquire()
        except RunLocked as e:
            refused = e
    if distributed.any_rank(refused is not None):
        raise refused or RunLocked("rank 0 found this run being trained by another trainer (its output says which)")
