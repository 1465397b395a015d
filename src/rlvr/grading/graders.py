"""The graders by name (`verifier.grader`), as a grading worker runs them:
each has a training half (the rewards, and validation during training) and
an evaluation half, the same function but for SIREN's, whose official code
grades them differently (rlvr.grading.siren).

Each takes (golds, responses, timeout_s, answer_after) of one problem and
returns its GroupGrade. Importing this module imports math-verify and sympy:
only workers (rlvr.grading.worker) and tests do.
"""

from __future__ import annotations

from rlvr.grading.deepscaler import deepscaler_group
from rlvr.grading.grades import GroupGrade
from rlvr.grading.math_verify_grader import grade_group
from rlvr.grading.siren import siren_eval_group, siren_reward_group

HALVES = ("train", "eval")
GROUP_GRADERS = {"math_verify": {"train": grade_group, "eval": grade_group},
                 "deepscaler": {"train": deepscaler_group, "eval": deepscaler_group},
                 "siren_official": {"train": siren_reward_group, "eval": siren_eval_group}}


def grade_with(grader: str, half: str, golds: list[str], responses: list[str], timeout_s: int,
               answer_after: str | None) -> GroupGrade:
    return GROUP_GRADERS[grader][half](golds, responses, timeout_s, answer_after)
