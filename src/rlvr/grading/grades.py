"""What a grader returns, and what every grader shares: the answer span of a
response and maj@k by the grader's own equality. Imports nothing heavy: the
caller's side (rlvr.grading.pool) and the workers both read it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

# A grade's status. TOO_LONG: the answer is longer than a grader parses whole; it is no
# answer (never a grade of a fragment of it) and counted apart. EMPTY: an empty final box
# (`\boxed{}`), which deepscaler tells from no answer (TRPA's preference levels).
OK, NO_ANSWER, EMPTY, TOO_LONG, TIMEOUT, ERROR = "ok", "no_answer", "empty_answer", "too_long", "timeout", "error"
# NOT_A_NUMBER: the task asks for a number and the stated answer is not one ("7 + 1" for 8).
# RESTATED: our grader's extracted answer is an expression copied from the question.
# NOT_A_CHOICE: a multiple-choice task's stated answer names no option letter.
NOT_A_NUMBER, NOT_A_CHOICE, RESTATED = "not_a_number", "not_a_choice", "restated"
FAILED = (TIMEOUT, ERROR)  # statuses where the grader could not decide


@dataclass(frozen=True)
class Grade:
    correct: bool
    extracted: str  # the answer the grader extracted ('' when none)
    status: str  # ok | no_answer | too_long | timeout | error (also: graded wrong after a comparison failed)
    compare_errors: int = 0  # comparisons with a gold that raised or timed out, whatever the verdict


@dataclass
class GroupGrade:
    items: list[Grade]
    majority_correct: bool  # maj@k of this group

    @classmethod
    def failed(cls, size: int, status: str) -> "GroupGrade":
        """A group no worker could grade (timed out, or its worker died)."""
        return cls([Grade(False, "", status) for _ in range(size)], False)


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
                "empty_answers": self.by_status[EMPTY], "too_long": self.by_status[TOO_LONG],
                "timeouts": self.by_status[TIMEOUT],
                "errors": self.by_status[ERROR], "compare_errors": self.compare_errors,
                "not_a_number": self.by_status[NOT_A_NUMBER],
                "not_a_choice": self.by_status[NOT_A_CHOICE], "restated": self.by_status[RESTATED]}


def preference_level(grade: Grade) -> int:
    """TRPA's preference level of a graded response (its DeepScaleR reward in
    DisCO's copy, deepscaler/deepscaler/rewards/math_reward_pl.py lines
    28-119): 1 correct, 2 a wrong answer, 3 an empty answer, 4 no answer (no
    `</think>`, no box, or one too long to grade)."""
    if grade.correct:
        return 1
    if grade.status == EMPTY:
        return 3
    return 4 if grade.status in (NO_ANSWER, TOO_LONG) else 2


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


def majority_correct(items: list[Grade], answers: list, same: Callable[[object, object], bool]) -> bool:
    """maj@k under a grader's own equality `same`: each answer (None: none)
    joins the first cluster whose representative it equals, the largest
    cluster wins (ties: the earliest), and its first member's verdict is the
    group's."""
    clusters: list[list[int]] = []
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        for members in clusters:
            if same(answers[members[0]], answer):
                members.append(i)
                break
        else:
            clusters.append([i])
    return bool(clusters) and items[max(clusters, key=len)[0]].correct  # max keeps the first of equal sizes
