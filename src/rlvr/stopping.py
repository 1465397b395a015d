"""Stopping a training when asked: a scheduler's SIGTERM (Slurm, Kubernetes,
`docker stop`) or a person's Ctrl-C (SIGINT).

The first SIGTERM or SIGINT asks for a stop and nothing more: the trainer
decides where (rlvr.training.trainer). A signal during the rollout or grading abandons
that step before its update, so the checkpoint holds the last complete step
and the job ends within a rollout; a signal during the update, validation or
a checkpoint write lets the step finish and checkpoints it. Repeated SIGTERMs
ask again (a launcher forwards the signal its group already got); a second
Ctrl-C aborts at once, without a checkpoint.

Exit statuses of the stage scripts: 2 a params or input problem found before
any compute, 3 stopped with the checkpoint written, 4 failed (a step's
grading, a checkpoint write) with the last checkpoint kept, 128 + signal
aborted.
"""

from __future__ import annotations

import signal

EXIT_CONFIG = 2
EXIT_STOPPED = 3
EXIT_FAILED = 4
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingStopped(RuntimeError):
    """The run stopped early with its checkpoint written; rerunning resumes it."""


class TrainingFailed(RuntimeError):
    """The run cannot go on by itself (its grader failed, a checkpoint could
    not be written); the message names the cause and the checkpoint kept."""

    exit_status = EXIT_FAILED


class TrainingAborted(BaseException):
    """A second Ctrl-C: stop now, without a checkpoint. A BaseException, as
    KeyboardInterrupt is, so no `except Exception` on the way swallows it."""

    def __init__(self, signum: int):
        super().__init__(f"aborted by a second {signal.Signals(signum).name}; nothing saved since the last checkpoint")
        self.exit_status = 128 + signum


class StopRequest:
    """While entered, SIGTERM and SIGINT set `signal` instead of killing the
    process (main thread only, as Python's signal handlers are)."""

    def __init__(self, say=print, on_request=lambda: None):
        """`on_request`: called once, when the first stop is asked for."""
        self.signal: int | None = None
        self._say, self._on_request, self._previous = say, on_request, {}

    @property
    def requested(self) -> bool:
        return self.signal is not None

    def request(self, signum: int = signal.SIGTERM) -> None:
        """Ask for a stop as the signal `signum` would."""
        if self.signal is None:
            self.signal = signum
            self._on_request()
            self._say(f"{self.name} received: stopping at the next safe point with a checkpoint "
                      "(Ctrl-C again aborts without one)")

    @property
    def name(self) -> str:
        return signal.Signals(self.signal).name if self.signal else "no signal"

    def _handle(self, signum, frame) -> None:
        if signum == signal.SIGINT and self.signal is not None:
            raise TrainingAborted(signum)
        self.request(signum)

    def __enter__(self) -> "StopRequest":
        self._previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}
