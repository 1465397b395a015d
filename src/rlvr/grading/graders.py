"""The graders by name (`verifier.grader`), as a grading worker runs them:
each has a training half (the rewards, and validation during training) and
an evaluation half, the same function but for SIREN's, whose official code
grades them differently (rlvr.grading.siren_official).

Each takes (golds, responses, timeout_s, answer_after) of one problem and
returns its GroupGrade; ours also reads the question, to refuse an answer that
restates it. Before any of them, the task's answer form applies
(rlvr.grading.answer_forms): where a task asks for a number, a response whose
stated answer is not a numeric literal earns nothing, and the grader sees the
literal alone, in the form it reads a final answer. Importing this module imports math-verify and sympy:
only workers (rlvr.grading.worker) and tests do.
"""

from __future__ import annotations

from collections import Counter

from rlvr.grading.answer_forms import CHOICE, MATH, NUMBER, choice_answer, choice_letter, number_answer
from rlvr.grading.deepscaler import deepscaler_group
from rlvr.grading.grades import NO_ANSWER, NOT_A_CHOICE, NOT_A_NUMBER, OK, Grade, GroupGrade, answer_part
from rlvr.grading.math_verify_grader import grade_group
from rlvr.grading.siren_official import siren_eval_group, siren_reward_group

HALVES = ("train", "eval")
GROUP_GRADERS = {"math_verify": {"train": grade_group, "eval": grade_group},  # keyed by rlvr.settings.sections.GRADERS (tests/grading/test_grader_names.py)
                 "deepscaler": {"train": deepscaler_group, "eval": deepscaler_group},
                 "siren_official": {"train": siren_reward_group, "eval": siren_eval_group}}


def grade_with(grader: str, half: str, golds: list[str], responses: list[str], timeout_s: int,
               answer_after: str | None, question: str = "", form: str = MATH) -> GroupGrade:
    grade = GROUP_GRADERS[grader][half]
    if form == CHOICE:
        return grade_choices(golds, responses, answer_after)
    if form != NUMBER:
        if grader == "math_verify":
            return grade(golds, responses, timeout_s, answer_after, question=question)
        return grade(golds, responses, timeout_s, answer_after)  # the paper's grader, as the paper ran it
    stated = [number_answer(answer_part(text, answer_after)) for text in responses]
    marker = answer_after or ""
    graded = grade(golds, [f"{marker}\\boxed{{{n}}}" if n is not None else "" for n, _ in stated], timeout_s,
                   answer_after)
    items = [it if n is not None else Grade(False, text[:200], NOT_A_NUMBER if text else NO_ANSWER)
             for it, (n, text) in zip(graded.items, stated)]
    return GroupGrade(items, graded.majority_correct)


def grade_choices(golds: list[str], responses: list[str], answer_after: str | None) -> GroupGrade:
    """A multiple-choice task, the same with every grader: a response is right when its stated answer
    names the gold's option letter; a stated answer that names no letter earns nothing."""
    right = {letter for g in golds if (letter := choice_letter(g))}
    stated = [choice_answer(answer_part(text, answer_after)) for text in responses]
    items = [Grade(letter in right, letter, OK) if letter
             else Grade(False, text[:200], NOT_A_CHOICE if text else NO_ANSWER) for letter, text in stated]
    votes = Counter(letter for letter, _ in stated if letter)
    return GroupGrade(items, bool(votes) and votes.most_common(1)[0][0] in right)
