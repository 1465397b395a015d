"""Binary rewards from math-verify, computed in a pool of worker processes.

Model text is untrusted: sympy can hang on `9^9^9^9` or blow up memory on deep
LaTeX. So grading never runs in the caller's process. Each worker has an
address-space limit, math-verify's own SIGALRM limit applies per call inside
the worker (SIGALRM only works on a process's main thread, another reason for
processes), and a hard wall-clock limit per group catches the C-level hangs
that SIGALRM cannot interrupt: the pool is then replaced and the group scored 0.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
from collections import Counter
from dataclasses import dataclass, field

from tqdm.auto import tqdm

OK, NO_ANSWER, TIMEOUT, ERROR = "ok", "no_answer", "timeout", "error"
MAX_RESPONSE_CHARS = 20_000  # the final answer is near the end; longer text is cut from the front


@dataclass(frozen=True)
class Grade:
    correct: bool
    extracted: str  # the answer math-verify extracted ('' when none)
    status: str  # ok | no_answer | timeout | error


@dataclass
class GroupGrade:
    items: list[Grade]
    majority_correct: bool  # maj@k of this group


@dataclass
class GradeCounts:
    total: int = 0
    correct: int = 0
    by_status: Counter = field(default_factory=Counter)

    def add(self, groups: list[GroupGrade]) -> None:
        for g in groups:
            for it in g.items:
                self.total += 1
                self.correct += it.correct
                self.by_status[it.status] += 1

    def summary(self) -> dict[str, int]:
        return {"graded": self.total, "parse_failures": self.by_status[NO_ANSWER],
                "timeouts": self.by_status[TIMEOUT], "errors": self.by_status[ERROR]}


# ---- worker side -----------------------------------------------------------


def _init_worker(memory_mb: int) -> None:
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import logging

    import math_verify  # noqa: F401  (pay the import once per worker)

    # math-verify logs a traceback for every timeout; the counts say it better.
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)


def _parse_gold(gold: str):
    from math_verify import parse

    parsed = parse(f"${gold}$")
    return parsed if parsed else parse(gold)


def _parse_response(text: str, timeout_s: int):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    # The last \boxed{} is the final answer: parse from there on, so earlier
    # boxed drafts are not merged into it (and less text goes through sympy).
    start = text.rfind("\\boxed")
    tail = text[start:] if start >= 0 else text
    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    return parse(tail[-MAX_RESPONSE_CHARS:], extraction_config=config, parsing_timeout=timeout_s, raise_on_error=True)


def _equal(a, b, timeout_s: int) -> bool:
    from math_verify import verify

    return verify(a, b, timeout_seconds=timeout_s, raise_on_error=True)


def answer_part(text: str, answer_after: str | None) -> str:
    """The part of a response that holds its final answer. With a marker (the
    R1-distill models' "</think>"), the text after its first occurrence; a
    response without the marker never finished thinking and has no answer."""
    if answer_after is None:
        return text
    head, found, tail = text.partition(answer_after)
    return tail if found else ""


def grade_group(golds: list[str], responses: list[str], timeout_s: int = 5,
                answer_after: str | None = None) -> GroupGrade:
    """Grade the k responses to one problem; runs inside a worker process."""
    from math_verify.errors import TimeoutException

    gold_parsed = [g for g in (_parse_gold(x) for x in golds) if g]
    items, parsed = [], []
    for text in responses:
        try:
            pred = _parse_response(answer_part(text, answer_after), timeout_s)
            if not pred:
                items.append(Grade(False, "", NO_ANSWER))
                parsed.append(None)
                continue
            correct = any(_equal(g, pred, timeout_s) for g in gold_parsed)
            items.append(Grade(bool(correct), str(pred[-1])[:200], OK))
            parsed.append(pred)
        except TimeoutException:
            items.append(Grade(False, "", TIMEOUT))
            parsed.append(None)
        except Exception:  # noqa: BLE001  sympy raises anything on hostile input
            items.append(Grade(False, "", ERROR))
            parsed.append(None)
    return GroupGrade(items, _majority_correct(items, parsed, timeout_s))


def _majority_correct(items: list[Grade], parsed: list, timeout_s: int) -> bool:
    """maj@k: cluster the extracted answers by math-verify equivalence (each
    answer joins the first cluster whose representative it equals), take the
    largest cluster (ties: the earliest), and report whether it is correct."""
    clusters: list[list[int]] = []
    for i, pred in enumerate(parsed):
        if pred is None:
            continue
        for members in clusters:
            try:
                same = _equal(parsed[members[0]], pred, timeout_s)
            except Exception:  # noqa: BLE001
                same = False
            if same:
                members.append(i)
                break
        else:
            clusters.append([i])
    if not clusters:
        return False
    best = max(clusters, key=len)  # max keeps the first of equal-sized clusters
    return items[best[0]].correct


# ---- caller side -----------------------------------------------------------


class Verifier:
    """A pool of grading workers. Use as a context manager, or call close()."""

    def __init__(self, workers: int = 2, timeout_s: float = 5, group_timeout_s: float = 60, memory_mb: int = 2048,
                 answer_after: str | None = None):
        self.workers, self.answer_after = workers, answer_after
        self.timeout_s = max(1, int(round(timeout_s)))
        self.group_timeout_s = group_timeout_s
        self.memory_mb = memory_mb
        self.counts = GradeCounts()
        self.pools_replaced = 0
        self._ctx = mp.get_context("spawn")  # never fork a process that holds vLLM/torch threads
        self._pool = self._new_pool()

    def _new_pool(self):
        return self._ctx.Pool(self.workers, initializer=_init_worker, initargs=(self.memory_mb,))

    def grade(self, groups: list[tuple[list[str], list[str]]], desc: str | None = None) -> list[GroupGrade]:
        """Grade (golds, responses) pairs; order is preserved."""
        pending = [self._pool.apply_async(grade_group, (g, r, self.timeout_s, self.answer_after)) for g, r in groups]
        results, hung = [], False
        for (_, responses), job in tqdm(
            zip(groups, pending), total=len(groups), desc=desc or "verify", leave=False, disable=desc is None
        ):
            try:
                results.append(job.get(timeout=self.group_timeout_s))
            except mp.TimeoutError:
                hung = True
                results.append(GroupGrade([Grade(False, "", TIMEOUT) for _ in responses], False))
            except Exception:  # noqa: BLE001  a worker that died (memory limit, segfault)
                results.append(GroupGrade([Grade(False, "", ERROR) for _ in responses], False))
        if hung:  # a worker is stuck in C code: replace the whole pool
            self._pool.terminate()
            self._pool = self._new_pool()
            self.pools_replaced += 1
        self.counts.add(results)
        return results

    @classmethod
    def from_params(cls, params) -> "Verifier":
        """verifier.workers per node: the ranks of a node split them."""
        v = params.verifier
        workers = max(1, v.workers // params.launcher.procs_per_node)
        return cls(workers, v.timeout_s, v.group_timeout_s, answer_after=params.prompt.answer_after)

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()

    def __enter__(self) -> "Verifier":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
