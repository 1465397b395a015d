"""A grading worker: `python -m rlvr.grading.worker MEMORY_MB PARENT_PID`.

A fresh interpreter, started by rlvr.grading.pool, never a fork or a spawn
of the caller: multiprocessing's `spawn` and `forkserver` both re-import the
caller's main script in the child, and a training script has imported CUDA
torch by then (several GB of address space, which left a 2 GiB limit no room
to import math-verify: every grade a timeout). Here the worker imports only
the graders, measures its own size, and then limits its address space to
that plus MEMORY_MB, so the limit bounds what grading allocates, whatever
the caller has loaded.

Messages are pickled over two pipes (multiprocessing.connection framing):
jobs in on fd 0, results out on the original fd 1; fd 1 itself goes to
stderr, so nothing a library prints can corrupt a message. SIGINT and
SIGTERM are ignored (the caller decides when grading stops), and the kernel
kills the worker when its caller dies (PR_SET_PDEATHSIG), so a worker stuck
in C code never outlives the job.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
from multiprocessing.connection import Connection

READY = "ready"


def address_space_bytes() -> int:
    """This process's mapped address space (VmSize), what RLIMIT_AS counts."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _die_with(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the caller died before the line above ran
        os._exit(1)


def main() -> None:
    memory_mb, parent_pid = int(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with(parent_pid)
    results = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    jobs = Connection(0, writable=False)

    import logging

    from rlvr.grading.graders import grade_with
    from rlvr.grading.grades import ERROR, GroupGrade

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # a traceback per timeout; counts say it better
    size = address_space_bytes()
    limit = size + memory_mb * (1 << 20) if memory_mb > 0 else resource.RLIM_INFINITY
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    results.send((READY, {"pid": os.getpid(), "address_space": size, "limit": limit,
                          "torch_loaded": "torch" in sys.modules}))
    while True:
        try:
            job_id, args = jobs.recv()
        except EOFError:  # the caller closed the pipe: done
            return
        try:
            result = grade_with(*args)
        except (MemoryError, RecursionError):  # hostile input past the graders' own guards
            result = GroupGrade.failed(len(args[3]), ERROR)
        results.send((job_id, result))


if __name__ == "__main__":
    main()
