"""One trainer per run directory.

Rank 0 of a training holds an exclusive lock on `<run_dir>/trainer.lock`
(fcntl.flock: the kernel releases it when the process ends, however it ends)
and writes in it who holds it. A second trainer of the same run finds it held:

- by a trainer that is stopping (a SIGTERM to `dvc repro`'s group ends DVC at
  once while its trainer finishes the step and checkpoints it), it waits for
  that trainer to exit, then resumes from the checkpoint it wrote;
- by a trainer that is not, it refuses, naming the holder's pid and host.

So steps.csv and MLflow never get the same step from two trainers.

A stop signal marks the holder as stopping the moment it arrives: Python runs
its handler only between bytecodes, which an update's long native calls can
delay by seconds, but its C-level handler writes the signal's number to the
wakeup fd at once (signal.set_wakeup_fd), and the holder's wakeup fd is the
lock's `trainer.lock.signals` file: a SIGTERM or SIGINT byte there says
"stopping" to the next trainer before Python has run a line."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

from rlvr import distributed

LOCK = "trainer.lock"
STOP_BYTES = {signal.SIGTERM.value, signal.SIGINT.value}  # signal numbers the wakeup fd writes as bytes


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
        self.signals = self.path.with_name(LOCK + ".signals")
        self.say, self.wait_s, self.poll_s = say, wait_s, poll_s
        self._file = None
        self._wakeup: tuple[int, int] | None = None  # (our fd, the wakeup fd it replaced)

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
        self._mark_signals()

    def _mark_signals(self) -> None:
        """Every signal with a Python handler is written to `signals` as it arrives (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            return
        fd = os.open(self.signals, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NONBLOCK, 0o644)
        self._wakeup = (fd, signal.set_wakeup_fd(fd, warn_on_full_buffer=False))

    @property
    def held(self) -> bool:
        return self._file is not None

    def holder(self) -> dict:
        """Who holds the lock, and whether it is stopping (it said so, or a stop signal reached it)."""
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        try:
            signalled = bool(set(self.signals.read_bytes()) & STOP_BYTES)
        except OSError:
            signalled = False
        return {**info, "stopping": True} if signalled else info

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
        if self._wakeup is not None:
            fd, previous = self._wakeup
            if threading.current_thread() is threading.main_thread():
                signal.set_wakeup_fd(previous)
            os.close(fd)
            self._wakeup = None
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
