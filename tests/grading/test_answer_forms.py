"""A reward for the answer, not the question: each task's answer form, with every grader.

The hole this closes: for gold 8, "To find 7 + 1, we first ..." restated the
question, math-verify read "7 + 1" and graded it 8, and RL learned to restate.
"""

import pytest

from rlvr.grading.answer_forms import (
    NUMBER,
    form_of,
    has_operator,
    is_number,
    kind_of_rewarded,
    number_answer,
    restates,
    stated_answer,
)
from rlvr.grading.graders import GROUP_GRADERS, grade_with
from rlvr.grading.grades import NO_ANSWER, NOT_A_NUMBER, OK, RESTATED

QUESTION = "Compute 7 + 1."
RESTATED_TEXT = "To find the final answer of 7 + 1, we first calculate both sides of the equation"
BARE = "7 + 1"
BOXED_EXPRESSION = r"\boxed{7+1}"
LITERALS = (r"\boxed{8}", "Answer: 8", "7 + 1 = 8", "The answer is 8.")

# What each grader gives, per task form, to (restated question, bare expression, boxed expression).
# The arithmetic task asks for a number: with every grader, only a literal earns anything. On a
# competition-math set (form math) ours refuses what is copied from the question, while the papers'
# graders grade as the papers ran them: SIREN's runs math-verify on the whole response (it rewards the
# restatement), DisCO's (deepscaler) reads a box and grades it with sympy-free rules (7+1 is not 8).
EXPECTED = {
    ("math_verify", "number"): (0, 0, 0), ("deepscaler", "number"): (0, 0, 0), ("siren_official", "number"): (0, 0, 0),
    ("math_verify", "math"): (0, 0, 0), ("deepscaler", "math"): (0, 0, 0), ("siren_official", "math"): (1, 1, 1),
}


@pytest.mark.parametrize("half", ["train", "eval"])
@pytest.mark.parametrize("grader,form", sorted(EXPECTED))
def test_each_grader_gives_each_task_what_its_rule_says(grader, form, half):
    g = grade_with(grader, half, ["8"], [RESTATED_TEXT, BARE, BOXED_EXPRESSION], 3, None, QUESTION, form)
    assert tuple(int(it.correct) for it in g.items) == EXPECTED[grader, form]
    literal = grade_with(grader, half, ["8"], [r"\boxed{8}"], 3, None, QUESTION, form)
    assert literal.items[0].correct and literal.items[0].status == OK


@pytest.mark.parametrize("grader", sorted(GROUP_GRADERS))
@pytest.mark.parametrize("text", LITERALS)
def test_the_literal_gold_earns_one_in_every_stated_place(grader, text):
    g = grade_with(grader, "train", ["8"], [text], 3, None, QUESTION, NUMBER)
    assert g.items[0].correct and g.items[0].extracted == "8"


def test_why_an_arithmetic_answer_earns_nothing_is_its_status():
    g = grade_with("math_verify", "eval", ["8"], ["7 + 1 = 7 + 1", "Let me think.", r"\boxed{9}", "7 + 1 = 8"], 3,
                   None, QUESTION, NUMBER)
    assert [(it.correct, it.status) for it in g.items] == [(False, NOT_A_NUMBER), (False, NO_ANSWER),
                                                           (False, OK), (True, OK)]
    assert g.items[0].extracted == "7 + 1"


def test_our_grader_names_a_restatement_and_still_grades_an_expression_of_its_own():
    g = grade_with("math_verify", "eval", ["8"], [RESTATED_TEXT, "The answer is 4 + 4.", r"\boxed{8}"], 3, None,
                   QUESTION, "math")
    assert [(it.correct, it.status) for it in g.items] == [(False, RESTATED), (True, OK), (True, OK)]


def test_a_gold_that_the_question_holds_is_no_restatement():
    # "Simplify 2x + 1." with gold 2x+1: the question holds the gold itself.
    g = grade_with("math_verify", "eval", ["2x+1"], [r"\boxed{2x+1}"], 3, None, "Write 2x+1 in simplest form.", "math")
    assert g.items[0].correct


def test_restated_answers_do_not_vote_in_maj_at_k():
    # Three restatements and one literal: the restatements are no answers, so the literal is the majority.
    g = grade_with("math_verify", "eval", ["8"], [BARE, BARE, BOXED_EXPRESSION, r"\boxed{8}"], 3, None, QUESTION,
                   "math")
    assert g.majority_correct
    g = grade_with("math_verify", "eval", ["8"], [BARE, BARE, BOXED_EXPRESSION, r"\boxed{8}"], 3, None, QUESTION,
                   NUMBER)
    assert g.majority_correct


@pytest.mark.parametrize("text,stated", [
    ("6 + 6 = 12.\n\nThe correct answer is \\boxed", "12"),  # an unfinished box states nothing
    ("3 + 9 = 22 = 3 * 9", "3 * 9"),  # the last "=" holds an expression
    (r"so \boxed{7} and then 4 = 4", "4"),  # whichever place comes last
    ("Answer: **8**", "8"),
    ("**3 + 3 = 6**", "6"),  # markdown's bold around an equation (seen in the base model's responses)
    ("2 + 3 = **5**.", "5"),
    ("The answer is \\boxed{9}.", "9"),
    ("7 + 1 =", None),
    ("no answer here", None),
])
def test_the_stated_place(text, stated):
    assert stated_answer(text) == stated


def test_number_literals_and_operators():
    assert [is_number(x) for x in ("8", "-12", "3.5", "8.", "$8$", "7+1", "1/2", "x", "")] == \
        [True, True, True, True, True, False, False, False, False]
    assert number_answer("7 + 1 = 8")[0] == "8" and number_answer("Answer: 7 + 1") == (None, "7 + 1")
    assert [has_operator(x) for x in ("7 + 1", "-5", r"4 \times 5", r"\frac{1}{2}", "2^3", "x=3")] == \
        [True, False, True, False, True, True]


def test_restates_needs_an_expression_copied_from_the_question():
    assert restates("7+1", "Compute 7 + 1.")
    assert restates(r"4 \times 5", "Compute 4 * 5.")  # spellings of one operator are one operator
    assert not restates("8", "Compute 8 + 0.")  # a literal the question holds is no restatement
    assert not restates("4 + 4", "Compute 7 + 1.")


def test_the_audit_kinds():
    assert kind_of_rewarded("8", ["8"], QUESTION) == "gold"
    assert kind_of_rewarded(r"\dfrac{1}{2}", [r"\frac12", r"\frac{1}{2}"], "") == "gold"
    assert kind_of_rewarded("7 + 1", ["8"], QUESTION) == "copied"
    assert kind_of_rewarded("4 + 4", ["8"], QUESTION) == "expression"
    assert kind_of_rewarded("0.5", [r"\frac{1}{2}"], "") == "other"


def test_each_set_states_its_form():
    assert form_of("arithmetic") == NUMBER and form_of("math500") == "math"
