"""The papers' own graders (verifier.grader), case by case as their official
code decides, and where they part from ours."""

import pytest

from rlvr.schema import ConfigError
from rlvr.grading.deepscaler import deepscaler_group, grade_mathd, grade_sympy, last_boxed
from rlvr.grading.siren import siren_group
from rlvr.params import parse_params
from rlvr.grading.grades import NO_ANSWER, OK
from rlvr.grading.math_verify_grader import grade_group
from rlvr.grading.pool import Verifier


def deepscaler(gold, response, answer_after="</think>"):
    return deepscaler_group([gold], [response], 5, answer_after).items[0]


def siren(gold, response):
    return siren_group([gold], [response], 5, None).items[0]


@pytest.mark.parametrize("gold, answer, expected", [
    ("0.5", "\\frac{1}{2}", True),             # mathd: 0.5 is rewritten as \frac{1}{2}
    ("\\frac{1}{2}", "\\dfrac12", True),       # dfrac, \frac12 -> \frac{1}{2}
    ("1/2", "2/4", False),                     # an unreduced fraction is not the reduced one
    ("4", "4.0", True),                        # a float that is an integer becomes the integer
    ("4", "\\frac{8}{2}", False),              # an integer gold needs an exact match, no simplify
    ("62.5%", "62.5\\%", True),                # percent signs are dropped on both sides
    ("(1, 2)", "(1,2)", True),                 # spaces go
    ("(1, 2)", "(2, 1)", False),
    ("\\frac{\\sqrt{2}}{2}", "\\sqrt{2}/2", True),  # both through pylatexenc to sqrt(2)/2
    ("10", "10 \\text{ cm}", True),            # a unit after "\text{ " is dropped
    ("x^2+1", "1+x^2", True),                  # sympy difference simplifies to 0
])
def test_deepscaler_equality_as_the_official_code(gold, answer, expected):
    assert (grade_mathd(answer, gold) or grade_sympy(answer, gold)) is expected
    assert deepscaler(gold, f"<think>work</think> so \\boxed{{{answer}}}").correct is expected


def test_deepscaler_reads_the_span_between_think_markers():
    assert deepscaler("3", "\\boxed{3}").status == NO_ANSWER  # no </think>: a format error, reward 0
    assert deepscaler("3", "\\boxed{3}", answer_after=None).correct  # without the marker: the whole response
    assert deepscaler("3", "<think>\\boxed{3}</think> I am unsure").status == NO_ANSWER  # the thinking's box is not read
    assert deepscaler("1", "<think>a</think> \\boxed{1} </think> \\boxed{2}").correct  # first to second </think>
    assert deepscaler("7", "<think>a</think> \\boxed{3} no, \\boxed{7}").correct  # the last box
    assert last_boxed("\\boxed{\\frac{1}{2}} and \\boxed{x^{2}}") == "x^{2}"
    assert deepscaler("\\boxed{3}", "<think></think>\\boxed{3}").correct  # a boxed gold is unboxed first


def test_deepscaler_majority_uses_its_own_equality():
    g = deepscaler_group(["1/2"], ["<think></think>\\boxed{2/4}", "<think></think>\\boxed{1/2}",
                                   "<think></think>\\boxed{\\frac{1}{2}}"], 5, "</think>")
    assert [it.correct for it in g.items] == [False, True, True] and g.majority_correct
    g = deepscaler_group(["5"], ["<think></think>\\boxed{4}", "<think></think>\\boxed{4}",
                                 "<think></think>\\boxed{5}"], 5, "</think>")
    assert not g.majority_correct


def test_siren_verifies_the_whole_response_with_math_verify():
    assert siren("0", "So the answer is \\boxed{0}.").correct  # the gold is boxed before parsing
    assert siren("4", "<think>maybe \\boxed{3}</think> the sum is \\boxed{4}").correct  # the last box
    assert siren("\\frac{1}{2}", "\\boxed{0.5}").correct
    assert siren("5", "I do not know.").status == NO_ANSWER
    assert siren("5", "\\boxed{6}").status == OK and not siren("5", "\\boxed{6}").correct


def test_siren_majority_reboxes_the_most_common_answer():
    g = siren_group(["4"], ["\\boxed{4}", "\\boxed{3}", "\\boxed{4.0}", "\\boxed{3}", "\\boxed{4}"], 5, None)
    assert g.majority_correct and sum(it.correct for it in g.items) == 3
    g = siren_group(["4"], ["\\boxed{3}", "\\boxed{3}", "\\boxed{4}"], 5, None)
    assert not g.majority_correct


@pytest.mark.parametrize("gold, response, ours, siren_official, deepscaler_official", [
    ("-2, 1", "the solutions are \\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}", True, True, False),
    ("62.5%", "\\boxed{62.5\\%}", True, False, True),    # latex2sympy2_extended 1.11.0 reads it as text
    ("7", "First guess \\boxed{3}; checking again, the answer is \\boxed{7}", True, False, True),
    ("B", "The answer is (B).", True, False, False),  # only ours reads an unboxed letter
    ("\\frac{1}{2}", "\\boxed{2/4}", True, True, False),  # deepscaler: an unreduced fraction is wrong
])
def test_where_the_graders_part(gold, response, ours, siren_official, deepscaler_official):
    assert grade_group([gold], [response]).items[0].correct is ours
    assert siren(gold, response).correct is siren_official
    assert deepscaler(gold, "<think></think>" + response).correct is deepscaler_official


def test_the_pool_grades_with_the_named_grader():
    groups = [(["1/2"], ["<think></think>\\boxed{2/4}"]), (["-2, 1"], ["\\boxed{-2} and \\boxed{1}"])]
    with Verifier(workers=1, answer_after="</think>", grader="deepscaler") as v:
        ours_deepscaler = [g.items[0].correct for g in v.grade(groups)]
    with Verifier(workers=1, answer_after="</think>") as v:
        ours = [g.items[0].correct for g in v.grade(groups)]
    assert ours_deepscaler == [False, False] and ours == [True, False]  # the second has no </think>
    with pytest.raises(ValueError, match="unknown grader 'sympy'"):
        Verifier(workers=1, grader="sympy")


def test_grader_setting_is_checked():
    with pytest.raises(ConfigError, match="'verifier.grader' has unknown name 'deepscale' .did you mean 'deepscaler'"):
        parse_params({"verifier": {"grader": "deepscale"}})
