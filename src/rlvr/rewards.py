"""Binary rewards from math-verify (or a paper's own grader, rlvr.official_graders),
computed in a pool of worker processes.

Model text is untrusted: sympy can hang on `9^9^9^9` or blow up memory on deep
LaTeX. So grading never runs in the caller's process. Each worker has an
address-space limit, math-verify's own SIGALRM limit applies per call inside
the worker (SIGALRM only works on a process's main thread, another reason for
processes), and a hard wall-clock limit per group catches the C-level hangs
that SIGALRM cannot interrupt: the pool is then replaced and the group scored 0.
"""

from __future__ import annotations

import multiprocessing as mp
import re
import resource
from collections import Counter
from dataclasses import dataclass, field

from tqdm.auto import tqdm

from rlvr.config import GRADERS

OK, NO_ANSWER, TIMEOUT, ERROR = "ok", "no_answer", "timeout", "error"
MAX_RESPONSE_CHARS = 20_000  # the final answer is near the end; longer text is cut from the front


@dataclass(frozen=True)
class Grade:
    correct: bool
    extracted: str  # the answer math-verify extracted ('' when none)
    status: str  # ok | no_answer | timeout | error (also: graded wrong after a comparison failed)
    compare_errors: int = 0  # comparisons with a gold that raised or timed out, whatever the verdict


@dataclass
class GroupGrade:
    items: list[Grade]
    majority_correct: bool  # maj@k of this group


@dataclass
class GradeCounts:
    total: int = 0
    correct: int = 0
    by_status: Counter = field(default_factory=Counter)
    compare_errors: int = 0

    def add(self, groups: list[GroupGrade]) -> None:
        for g in groups:
            for it in g.items:
                self.total += 1
                self.correct += it.correct
                self.by_status[it.status] += 1
                self.compare_errors += it.compare_errors

    def summary(self) -> dict[str, int]:
        return {"graded": self.total, "parse_failures": self.by_status[NO_ANSWER],
                "timeouts": self.by_status[TIMEOUT], "errors": self.by_status[ERROR],
                "compare_errors": self.compare_errors}


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


# ---- answer text: what of a response is parsed, and how golds are read -----------
#
# Written as text rewrites before math-verify sees either side, so math-verify and
# latex2sympy2_extended stay at their pinned versions (0.9.0 / 1.11.0).

_BOX = re.compile(r"\\boxed\s*\{")
# What may stand between two boxes of one final answer: commas, "and"/"or" (plain or in
# \text{}), spacing commands and math delimiters. Any other word makes the earlier box a draft.
_JOINER = re.compile(r"(?:\s|,|~|\band\b|\bor\b|\\q?quad\b|\\[,;:! ]|\\text\{[\s,]*(?:and|or)?[\s,]*\}"
                     r"|\$|\\[()\[\]])*")
_THOUSANDS = re.compile(r"-?[1-9]\d{0,2}(?:(?:\{,\}|\\,|,)\d{3})+")
_PERCENT = re.compile(r"(.*?)\s*\\?%")
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)")
_LETTER_GOLD = re.compile(r"\s*\(?([A-E])\)?\s*")
# "The answer is (B).", "**Answer:** C", "answer is $\textbf{(D)}$": the letter must stand alone.
_ANSWER_LETTER = re.compile(r"(?i:answer)(?:\s+is)?\s*:?[\s*$]*(?:\\text(?:bf)?\{)?\(?([A-E])\)?(?![A-Za-z0-9])")


def _plain_number(s: str) -> str:
    """1{,}000, 1\\,000 and 1,000 -> 1000. latex2sympy reads 1\\,000 as a product. Lists
    like 69,84 or 2500,7500 and decimal commas like 0,111 never match (a leading 1-3 digit
    group that is not 0, then groups of exactly three digits)."""
    s = s.strip()
    return re.sub(r"\{,\}|\\,|,", "", s) if _THOUSANDS.fullmatch(s) else s


def _strip_percent(s: str) -> str | None:
    """The answer without its trailing % or \\% (None when it has none). latex2sympy2_extended
    1.11.0 cannot parse a boxed 62.5\\% at all, and reads a gold 62.5% as 0.625 but 8 \\% as 8."""
    m = _PERCENT.fullmatch(s.strip())
    return _plain_number(m.group(1)) if m and m.group(1) else None


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every closed, non-nested \\boxed{...}, in order."""
    pairs, stack = {}, []
    for m in re.finditer(r"[{}]", text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    found, end = [], 0
    for m in _BOX.finditer(text):
        close = pairs.get(m.end() - 1)
        if close is not None and m.start() >= end:
            found.append((m.start(), close + 1, text[m.end():close]))
            end = close + 1
    return found


def _final_run(text: str) -> list[tuple[int, int, str]]:
    """The boxes of the final answer: the last box and the boxes before it that only
    joiners separate from it ("\\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}")."""
    boxes = _boxes(text)
    if not boxes or boxes[-1][0] != text.rfind("\\boxed"):
        return []  # the last \boxed is unclosed or nested: left to math-verify as it stands
    run = [boxes[-1]]
    for box in reversed(boxes[:-1]):
        if not _JOINER.fullmatch(text, box[1], run[0][0]):
            break
        run.insert(0, box)
    return run


def _final_answer(text: str, letter_gold: bool, strip_percent: bool = False) -> str:
    """The text math-verify parses for a response: its final run of boxes as one box (the
    set or tuple math-verify forms from "\\boxed{a, b}"); without a box, the letter of an
    "answer is (A)" when the gold is a letter, else the whole text."""
    run = _final_run(text)
    if not run:
        if "\\boxed" in text:
            return text[text.rfind("\\boxed"):]
        letters = _ANSWER_LETTER.findall(text) if letter_gold else []
        return f"\\boxed{{{letters[-1]}}}" if letters else text
    contents = [_plain_number(c) for _, _, c in run]
    if strip_percent:
        contents = [_strip_percent(c) or c for c in contents]
    contents = list(dict.fromkeys(contents))  # a repeated box is one answer, not a set of two
    return f"\\boxed{{{', '.join(contents)}}}{text[run[-1][1]:]}"


def _parse_response(text: str, timeout_s: int):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    return parse(text[-MAX_RESPONSE_CHARS:], extraction_config=config, parsing_timeout=timeout_s, raise_on_error=True)


# A gold's percent-free form counts against a percent-free answer, only when both were
# percentages or the gold is a bare number with % (62.5% vs \boxed{62.5}); an answer's
# percent-free form never meets the gold as written (0.625\% is not 62.5%).
_AS_WRITTEN, _PERCENT_FREE, _BARE_PERCENT = "as_written", "percent_free", "bare_percent"


def _parse_golds(golds: list[str]) -> list[tuple[list, str]]:
    """(parsed gold, how it was read) for each reading of each gold that parses."""
    readings = []
    for gold in golds:
        gold = _plain_number(gold)
        readings.append((gold, _AS_WRITTEN))
        bare = _strip_percent(gold)
        if bare is not None:
            readings.append((bare, _BARE_PERCENT if _NUMBER.fullmatch(bare) else _PERCENT_FREE))
    return [(p, how) for p, how in ((_parse_gold(g), how) for g, how in readings) if p]


def _against(how: str, pred, pred_no_percent):
    """The parsed answer a gold reading is compared with (None: this reading does not apply)."""
    if how == _AS_WRITTEN:
        return pred
    return pred_no_percent or (pred if how == _BARE_PERCENT else None)


def _compare(gold, pred, timeout_s: int) -> tuple[bool, str]:
    """(equal, problem): problem is TIMEOUT or ERROR when math-verify raised, '' otherwise.
    After an error the extracted strings are compared: 12:00 parses to complex infinity on
    both sides, and math-verify raises before it reaches its own string comparison."""
    from math_verify import verify
    from math_verify.errors import TimeoutException

    try:
        return bool(verify(gold, pred, timeout_seconds=timeout_s, raise_on_error=True)), ""
    except TimeoutException:
        return False, TIMEOUT
    except Exception:  # noqa: BLE001  sympy raises anything on hostile input
        return _same_text(gold, pred), ERROR


def _same_text(a: list, b: list) -> bool:
    def texts(parsed):
        return {re.sub(r"\s+", "", x) for x in parsed if isinstance(x, str)} - {""}

    return bool(texts(a) & texts(b))


def _grade_answer(golds: list, pred, pred_no_percent, timeout_s: int) -> tuple[bool, list[str]]:
    """Is the answer any gold? Every reading is tried until one matches: a comparison that
    raises is counted and the next gold still gets its turn."""
    problems = []
    for gold, how in golds:
        target = _against(how, pred, pred_no_percent)
        if target is None:
            continue
        same, problem = _compare(gold, target, timeout_s)
        problems += [problem] if problem else []
        if same:
            return True, problems
    return False, problems


def _status(correct: bool, problems: list[str]) -> str:
    """A wrong verdict reached past a failed comparison is not a clean 'ok': the failed
    comparison might have matched."""
    if correct or not problems:
        return OK
    return TIMEOUT if TIMEOUT in problems else ERROR


def answer_part(text: str, answer_after: str | None) -> str:
    """The part of a response that holds its final answer: the whole response
    (SIREN's reward and evaluation verify all of it), or, with a marker (the
    R1-distill models' "</think>"), the text between its first and second
    occurrence, as DisCO's deepscaler reward reads it (math_reward.py lines
    37-38: `split("</think>")[1]`). A response without the marker never
    finished thinking and has no answer (lines 39-40)."""
    if answer_after is None:
        return text
    parts = text.split(answer_after)
    return parts[1] if len(parts) > 1 else ""


def grade_group(golds: list[str], responses: list[str], timeout_s: int = 5,
                answer_after: str | None = None) -> GroupGrade:
    """Grade the k responses to one problem; runs inside a worker process."""
    from math_verify.errors import TimeoutException

    gold_parsed = _parse_golds(golds)
    letter_gold = any(_LETTER_GOLD.fullmatch(g) for g in golds)
    percent_gold = any(how != _AS_WRITTEN for _, how in gold_parsed)
    items, parsed = [], []
    for text in responses:
        try:
            item, pred = _grade_response(answer_part(text, answer_after), gold_parsed, letter_gold, percent_gold,
                                         timeout_s)
        except TimeoutException:
            item, pred = Grade(False, "", TIMEOUT), None
        except Exception:  # noqa: BLE001  sympy raises anything on hostile input
            item, pred = Grade(False, "", ERROR), None
        items.append(item)
        parsed.append(pred)
    return GroupGrade(items, _majority_correct(items, parsed, timeout_s))


def _grade_response(text: str, golds: list, letter_gold: bool, percent_gold: bool, timeout_s: int):
    """(Grade, parsed answer or None) of one response."""
    answer = _final_answer(text, letter_gold)
    pred = _parse_response(answer, timeout_s)
    if not pred:
        return Grade(False, "", NO_ANSWER), None
    no_percent = _final_answer(text, letter_gold, strip_percent=True) if percent_gold else answer
    pred_no_percent = _parse_response(no_percent, timeout_s) if no_percent != answer else None
    correct, problems = _grade_answer(golds, pred, pred_no_percent, timeout_s)
    return Grade(correct, str(pred[-1])[:200], _status(correct, problems), len(problems)), pred


def _majority_correct(items: list[Grade], parsed: list, timeout_s: int) -> bool:
    """maj@k: cluster the extracted answers by math-verify equivalence (each
    answer joins the first cluster whose representative it equals), take the
    largest cluster (ties: the earliest), and report whether it is correct."""
    clusters: list[list[int]] = []
    for i, pred in enumerate(parsed):
        if pred is None:
            continue
        for members in clusters:
            if _compare(parsed[members[0]], pred, timeout_s)[0]:
                members.append(i)
                break
        else:
            clusters.append([i])
    if not clusters:
        return False
    best = max(clusters, key=len)  # max keeps the first of equal-sized clusters
    return items[best[0]].correct




def grade_with(grader: str, golds: list[str], responses: list[str], timeout_s: int,
               answer_after: str | None) -> GroupGrade:
    """One group by the named grader: ours (math-verify, grade_group) or a
    paper's own (rlvr.official_graders); runs inside a worker process."""
    if grader == "math_verify":
        return grade_group(golds, responses, timeout_s, answer_after)
    from rlvr.official_graders import GROUP_GRADERS

    return GROUP_GRADERS[grader](golds, responses, timeout_s, answer_after)


# ---- caller side -----------------------------------------------------------


class Verifier:
    """A pool of grading workers. Use as a context manager, or call close()."""

    def __init__(self, workers: int = 2, timeout_s: float = 5, group_timeout_s: float = 60, memory_mb: int = 2048,
                 answer_after: str | None = None, grader: str = "math_verify"):
        if grader not in GRADERS:
            raise ValueError(f"unknown grader '{grader}'; valid: {', '.join(GRADERS)}")
        self.workers, self.answer_after, self.grader = workers, answer_after, grader
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
        pending = [self._pool.apply_async(grade_with, (self.grader, g, r, self.timeout_s, self.answer_after))
                   for g, r in groups]
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
        return cls(workers, v.timeout_s, v.group_timeout_s, answer_after=params.prompt.answer_after, grader=v.grader)

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()

    def __enter__(self) -> "Verifier":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
