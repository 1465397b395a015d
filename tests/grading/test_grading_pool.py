"""The grading pool: workers that start clean whatever the caller has loaded,
limits that bound grading, and failures that stop the caller instead of
scoring 0."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import REPO

from rlvr.grading.grades import TIMEOUT, TOO_LONG
from rlvr.grading.math_verify_grader import MAX_ANSWER_CHARS, grade_group
from rlvr.grading.pool import GraderUnavailable, GradingFailed, Verifier

TOWER = "\\boxed{9^{9^{9^{9}}}}"  # math-verify's parse runs until its SIGALRM limit


def test_grading_survives_a_caller_that_mapped_gigabytes(tmp_path):
    """The fault as it was found: a stage script that maps several GB of address
    space at its top (a CUDA `import torch` maps libtorch_cuda, cuBLAS, NCCL...)
    and then grades through the stage's entry point. Workers made by
    multiprocessing's spawn re-ran that top, so a 2 GiB limit left them no room
    to import math-verify and every group was graded a timeout."""
    script = tmp_path / "stage.py"
    script.write_text(textwrap.dedent("""
        import mmap
        RESERVED = mmap.mmap(-1, 6 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ)

        if __name__ == "__main__":
            from rlvr.grading.pool import Verifier
            from rlvr.settings.load import parse_params

            with Verifier.from_params(parse_params({})) as v:
                v.group_timeout_s = 20
                grade = v.grade([(["4"], ["so \\\\boxed{4}", "\\\\boxed{5}"])])[0]
                print([(g.correct, g.status) for g in grade.items], v.worker_info[0]["limit"] >> 20)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    graded, limit_mib = out.stdout.rsplit(" ", 1)
    assert graded == "[(True, 'ok'), (False, 'ok')]"
    assert 2048 < int(limit_mib) < 2048 + 512  # the worker's own size plus verifier memory, not the caller's 6 GB


def test_a_worker_imports_the_graders_and_no_torch():
    code = "import sys, rlvr.grading.worker, rlvr.grading.graders; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
    with Verifier(workers=1) as v:
        info = v.worker_info[0]
    assert info["torch_loaded"] is False and info["limit"] == info["address_space"] + 2048 * (1 << 20)


def test_the_memory_limit_holds_inside_a_worker():
    """An answer whose grading would allocate past the limit is an error for its
    group alone; the worker (or its replacement) grades the next group."""
    with Verifier(workers=1, timeout_s=5, group_timeout_s=30, memory_mb=256, fail_when_nothing_graded=False) as v:
        bomb = "\\boxed{" + "(" * 200_000 + "1" + ")" * 200_000 + "}"
        grades = v.grade([(["1"], [bomb]), (["5"], ["\\boxed{5}"])])
    assert not grades[0].items[0].correct
    assert grades[1].items[0].correct


def test_a_worker_that_cannot_start_stops_the_caller_with_its_cause(tmp_path, monkeypatch):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ImportError: cannot import math_verify' >&2\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(broken))
    with pytest.raises(GraderUnavailable, match=r"(?s)exit status 3.*cannot import math_verify"):
        Verifier(workers=2)


def test_a_call_where_nothing_could_be_graded_is_an_error():
    with Verifier(workers=1, timeout_s=5, group_timeout_s=1) as v:
        with pytest.raises(GradingFailed, match="no response could be graded: 2 of 2 timed out"):
            v.grade([(["5"], [TOWER, TOWER])])
        assert v.grade([(["5"], ["\\boxed{5}"])])[0].items[0].correct  # the pool is whole again


def test_a_whole_call_has_a_time_budget():
    """Four groups of eight towers, each under its own group limit, cost at most
    the call's budget; the pool grades normally afterwards."""
    with Verifier(workers=1, timeout_s=2, group_timeout_s=60, call_timeout_s=5, fail_when_nothing_graded=False) as v:
        t0 = time.perf_counter()
        grades = v.grade([(["5"], [TOWER] * 8) for _ in range(4)])
        elapsed = time.perf_counter() - t0
        assert elapsed < 15
        assert {it.status for g in grades for it in g.items} == {TIMEOUT}
        assert v.grade([(["5"], ["\\boxed{5}"])])[0].items[0].correct


def test_a_worker_killed_between_calls_is_replaced():
    with Verifier(workers=1) as v:
        os.kill(v.worker_info[0]["pid"], signal.SIGKILL)
        time.sleep(0.2)
        assert v.grade([(["5"], ["\\boxed{5}"])])[0].items[0].correct
        assert v.workers_replaced == 1


def test_workers_leave_signals_to_the_caller_and_die_with_it(tmp_path):
    """SIGTERM to the whole process group (a scheduler's stop) does not kill the
    workers mid-step, and a caller killed with SIGKILL takes its workers along."""
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys, time
        from rlvr.grading.pool import Verifier
        signal.signal(signal.SIGTERM, lambda *a: None)
        v = Verifier(workers=2)
        print(" ".join(str(i["pid"]) for i in v.worker_info), flush=True)
        time.sleep(60)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    os.killpg(proc.pid, signal.SIGTERM)
    time.sleep(0.5)
    assert all(_alive(p) for p in pids)
    proc.kill()
    proc.wait()
    deadline = time.time() + 10
    while any(_alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def nested_fraction(levels: int) -> str:
    """1/(1/(...(1/2))): 2 for an even number of levels, 1/2 for an odd."""
    return "\\frac{1}{" * levels + "2" + "}" * levels


def test_an_answer_too_long_to_parse_whole_is_no_answer():
    """Its tail would be another value: the last 20,000 characters of a nested
    fraction worth 2 parse as one worth 1/2."""
    answer = "\\boxed{" + nested_fraction(2000) + "}"
    assert len(answer) == 20_009 > MAX_ANSWER_CHARS
    item = grade_group(["\\frac{1}{2}"], [answer]).items[0]
    assert (item.correct, item.status) == (False, TOO_LONG)
    short = grade_group(["2"], ["\\boxed{" + nested_fraction(4) + "}"]).items[0]
    assert short.correct
