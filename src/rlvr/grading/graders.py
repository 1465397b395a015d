"""The graders by name (`verifier.grader`), as a grading worker runs them.

Each takes (golds, responses, timeout_s, answer_after) of one problem and
returns its GroupGrade. Importing this module imports math-verify and sympy:
only workers (rlvr.grading.worker) and tests do.
"""

from __future__ import annotations

from rlvr.grading.deepscaler import deepscaler_group
from rlvr.grading.grades import GroupGrade
from rlvr.grading.math_verify_grader import grade_group
from rlvr.grading.siren import siren_group

GROUP_GRADERS = {"math_verify": grade_group, "deepscaler": deepscaler_group, "siren_official": siren_group}


def grade_with(grader: str, golds: list[str], responses: list[str], timeout_s: int,
               answer_after: str | None) -> GroupGrade:
    return GROUP_GRADERS[grader](golds, responses, timeout_s, answer_after)
