"""One trainer per run directory: a second one refuses, naming the holder; it
waits for a holder that is stopping; a holder that dies leaves no lock."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rlvr.training.run_lock import RunLock, RunLocked

HOLDER = textwrap.dedent("""
    import sys, time
    from rlvr.training.run_lock import RunLock
    lock = RunLock(sys.argv[1])
    lock.acquire()
    if sys.argv[2] == "stopping":
        lock.stopping()
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
""")


def holder(run_dir, state: str, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir), state, str(seconds)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_trainer_refuses_naming_the_holder(tmp_path):
    proc = holder(tmp_path, "training", 60)
    try:
        with pytest.raises(RunLocked, match=rf"is being trained by pid {proc.pid} on .*kill -TERM {proc.pid}"):
            RunLock(tmp_path).acquire()
    finally:
        proc.kill()
        proc.wait()


def test_a_stopping_holder_is_waited_for_then_the_lock_is_ours(tmp_path):
    proc = holder(tmp_path, "stopping", 2)
    said = []
    t0 = time.monotonic()
    with RunLock(tmp_path, say=said.append, poll_s=0.1) as lock:
        waited = time.monotonic() - t0
        assert lock.held and lock.holder()["pid"] == os.getpid() and not lock.holder()["stopping"]
    assert proc.wait() == 0 and waited > 0.5
    assert said == [f"an earlier trainer of this run (pid {proc.pid}) is stopping: waiting for it to finish its step "
                    "and checkpoint, then resuming from there"]


def test_a_stopping_holder_past_the_wait_is_refused(tmp_path):
    proc = holder(tmp_path, "stopping", 60)
    try:
        with pytest.raises(RunLocked, match=f"pid {proc.pid}"):
            RunLock(tmp_path, say=lambda _: None, wait_s=0.3, poll_s=0.1).acquire()
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_leaves_no_lock(tmp_path):
    proc = holder(tmp_path, "training", 60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with RunLock(tmp_path, wait_s=0) as lock:
        assert lock.held


NATIVE = textwrap.dedent("""
    import signal, sys, time, torch
    from rlvr.stopping import StopRequest
    from rlvr.training.run_lock import RunLock
    torch.set_num_threads(1)
    lock = RunLock(sys.argv[1])
    with StopRequest(say=lambda _: None, on_request=lock.stopping):
        lock.acquire()
        a = torch.randn(3000, 3000)
        print("held", flush=True)
        while True:
            torch.linalg.matrix_power(a, 40)  # seconds in one native call: Python's handler waits for its end
""")


def test_a_stop_signal_marks_the_holder_stopping_at_once_even_inside_a_native_call(tmp_path):
    """SIGTERM while the holder is inside a long native call, a rerun 0.1 s later: it
    finds the holder stopping (the C-level handler wrote the signal to the lock's
    wakeup file) and waits, ten times in ten; it never refuses a trainer that is stopping."""
    for attempt in range(10):
        run_dir = tmp_path / f"run{attempt}"
        proc = subprocess.Popen([sys.executable, "-c", NATIVE, str(run_dir)], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "held"
            time.sleep(0.3)  # well inside a native call
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.1)
            assert RunLock(run_dir).holder()["stopping"] is True, f"attempt {attempt}"
        finally:
            proc.kill()
            proc.wait()
