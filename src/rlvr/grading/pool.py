"""The caller's side of grading: a pool of worker processes (rlvr.grading.worker).

Model text is untrusted: sympy can hang on `9^9^9^9` or exhaust memory on
deep LaTeX. So grading never runs in the caller's process. Each worker has an
address-space limit above its own size, math-verify's SIGALRM limits apply
per comparison inside it, a group that runs past `group_timeout_s` (C code
that SIGALRM cannot interrupt) gets its worker killed and replaced, and a
whole `grade()` call has a budget, `call_timeout_s`, so a batch of hostile
groups costs at most that. Failures are loud: a worker that cannot start
raises GraderUnavailable with its own error output, and a call in which no
response could be graded (every one timed out or failed) raises GradingFailed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import deque
from multiprocessing.connection import Connection, wait

from tqdm.auto import tqdm

from rlvr.grading import worker as worker_module
from rlvr.grading.answer_forms import form_of
from rlvr.grading.grades import ERROR, FAILED, TIMEOUT, GradeCounts, GroupGrade

START_TIMEOUT_S = 120.0  # importing math-verify and sympy takes seconds; a loaded node, longer


def grading_job(record, responses: list[str]) -> tuple:
    """What the pool grades for one record: its golds, the responses, its question and its task's answer form."""
    return record.golds, responses, record.problem, form_of(record.source, record.answer_form)


class GraderUnavailable(RuntimeError):
    """A grading worker could not start: nothing can be graded."""


class GradingFailed(RuntimeError):
    """No response of a grade() call could be graded: its rewards would all be 0."""


class _Worker:
    """One worker process and its two pipes."""

    def __init__(self, memory_mb: int):
        job_r, job_w = os.pipe()
        result_r, result_w = os.pipe()
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", worker_module.__name__, str(memory_mb), str(os.getpid())],
                                     stdin=job_r, stdout=result_w, stderr=self.stderr)
        os.close(job_r)
        os.close(result_w)
        self.jobs, self.results = Connection(job_w, readable=False), Connection(result_r, writable=False)
        self.info: dict = {}
        self.job: tuple[int, float] | None = None  # (group index, deadline) while grading

    def await_ready(self, timeout_s: float) -> None:
        try:
            ready = self.results.poll(timeout_s)
            message = self.results.recv() if ready else None
        except (EOFError, OSError):
            message = None
        if not message or message[0] != worker_module.READY:
            self.kill()
            cause = "no answer within %.0f s" % timeout_s if self.proc.returncode is None else \
                f"exit status {self.proc.returncode}"
            raise GraderUnavailable(f"a grading worker could not start ({cause}); its output:\n{self.output()}")
        self.info = message[1]

    def output(self, chars: int = 3000) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace").strip()
        return text[-chars:] or "(none)"

    def send(self, index: int, job: tuple, timeout_s: float) -> bool:
        """False when the worker is gone."""
        try:
            self.jobs.send((index, job))
        except (BrokenPipeError, OSError):
            return False
        self.job = (index, time.monotonic() + timeout_s)
        return True

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.close_pipes()

    def stop(self, grace_s: float = 2.0) -> None:
        """Close its jobs pipe (an idle worker exits on it), then kill what is left."""
        self.close_pipes()
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()
        self.stderr.close()

    def close_pipes(self) -> None:
        for conn in (self.jobs, self.results):
            if not conn.closed:
                conn.close()


class Verifier:
    """A pool of grading workers. Use as a context manager, or call close()."""

    def __init__(self, workers: int = 2, timeout_s: float = 5, group_timeout_s: float = 60, memory_mb: int = 2048,
                 answer_after: str | None = None, grader: str = "math_verify", call_timeout_s: float = 600,
                 fail_when_nothing_graded: bool = True, half: str = "eval"):
        """`half`: train (rewards, validation during training) or eval (the
        evaluation): a paper's grader may grade them differently (rlvr.grading.graders)."""
        from rlvr.settings.sections import GRADERS

        if grader not in GRADERS or half not in ("train", "eval"):
            raise ValueError(f"unknown grader '{grader}' or half '{half}'; valid: {', '.join(GRADERS)}; train, eval")
        self.answer_after, self.grader, self.half = answer_after, grader, half
        self.timeout_s = max(1, int(round(timeout_s)))
        self.group_timeout_s, self.call_timeout_s = group_timeout_s, call_timeout_s
        self.memory_mb, self.fail_when_nothing_graded = memory_mb, fail_when_nothing_graded
        self.counts = GradeCounts()
        self.workers_replaced = 0
        self._workers: list[_Worker] = []
        try:
            self._workers = [_Worker(memory_mb) for _ in range(max(1, workers))]  # they start side by side
            for w in self._workers:
                w.await_ready(START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_params(cls, params, half: str = "eval") -> "Verifier":
        """verifier.workers per node: the ranks of a node split them."""
        v = params.verifier
        workers = max(1, v.workers // params.launcher.procs_per_node)
        return cls(workers, v.timeout_s, v.group_timeout_s, answer_after=params.prompt.answer_after, grader=v.grader,
                   half=half)

    @property
    def worker_info(self) -> list[dict]:
        """Each worker's pid, own address space and limit, as it reported them at start."""
        return [w.info for w in self._workers]

    def grade(self, groups: list[tuple], desc: str | None = None) -> list[GroupGrade]:
        """Grade (golds, responses) pairs, or (golds, responses, question, answer form)
        (`grading_job`: the question and its task's form, so that a restated question or,
        where the task asks for a number, an expression earns nothing); order is preserved."""
        results: list[GroupGrade | None] = [None] * len(groups)
        todo = deque(range(len(groups)))
        budget_end = time.monotonic() + self.call_timeout_s
        with tqdm(total=len(groups), desc=desc or "verify", leave=False, disable=desc is None) as bar:
            while todo or any(w.job for w in self._workers):
                for i in self._dispatch(todo, groups):  # groups whose worker was gone before it got them
                    results[i] = GroupGrade.failed(len(groups[i][1]), ERROR)
                    bar.update()
                busy = [w for w in self._workers if w.job]
                now = time.monotonic()
                if now >= budget_end:
                    for i in [w.job[0] for w in busy] + list(todo):
                        results[i] = GroupGrade.failed(len(groups[i][1]), TIMEOUT)
                    todo.clear()
                    for w in busy:
                        self._replace(w)
                    break
                if not busy:
                    continue
                timeout = min([w.job[1] for w in busy] + [budget_end]) - now
                ready = set(wait([w.results for w in busy], max(timeout, 0)))
                for w in busy:
                    i = w.job[0]
                    if w.results in ready:
                        results[i] = self._receive(w, groups[i])
                    elif time.monotonic() >= w.job[1]:  # stuck in C code: only a kill stops it
                        results[i] = self._replace(w, TIMEOUT, groups[i])
                    else:
                        continue
                    bar.update()
        self.counts.add(results)
        self._check_graded(results)
        return results

    def _dispatch(self, todo: deque, groups) -> list[int]:
        """Give every idle worker its next group; the groups that met a dead worker."""
        lost = []
        for k in range(len(self._workers)):
            if self._workers[k].job is None and todo and self._workers[k].proc.poll() is not None:
                self._replace(self._workers[k])  # died while idle (killed from outside): its group is not lost
            while self._workers[k].job is None and todo:
                i = todo.popleft()
                golds, responses, *task = groups[i]
                job = (self.grader, self.half, golds, responses, self.timeout_s, self.answer_after, *task)
                if not self._workers[k].send(i, job, self.group_timeout_s):
                    self._replace(self._workers[k])
                    lost.append(i)
        return lost

    def _receive(self, w: _Worker, group) -> GroupGrade:
        try:
            _, result = w.results.recv()
        except (EOFError, OSError):  # it died mid-group: a segfault, or the memory limit hit in C code
            return self._replace(w, ERROR, group)
        w.job = None
        return result

    def _replace(self, w: _Worker, status: str | None = None, group=None) -> GroupGrade | None:
        """Kill `w` and start another in its place; the failed grade of its group."""
        w.kill()
        w.stderr.close()
        fresh = _Worker(self.memory_mb)
        self._workers[self._workers.index(w)] = fresh
        self.workers_replaced += 1
        fresh.await_ready(START_TIMEOUT_S)
        return GroupGrade.failed(len(group[1]), status) if status else None

    def _check_graded(self, results: list[GroupGrade]) -> None:
        items = [it for g in results for it in g.items]
        if not self.fail_when_nothing_graded or not items or any(it.status not in FAILED for it in items):
            return
        timeouts = sum(it.status == TIMEOUT for it in items)
        raise GradingFailed(
            f"no response could be graded: {timeouts} of {len(items)} timed out, the rest failed "
            f"({self.workers_replaced} grading workers replaced so far; limits: {self.timeout_s} s a comparison, "
            f"{self.group_timeout_s:g} s a group, {self.call_timeout_s:g} s a call, {self.memory_mb} MiB a worker). "
            f"Every reward would be 0. A worker's last output:\n{self._workers[0].output()}")

    def close(self) -> None:
        for w in self._workers:
            w.stop()
        self._workers = []

    def __enter__(self) -> "Verifier":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
