import pytest

from rlvr.data import sources
from rlvr.grading.grades import ERROR, NO_ANSWER, OK
from rlvr.grading.math_verify_grader import grade_group
from rlvr.grading.pool import Verifier


@pytest.fixture(scope="module")
def verifier():
    with Verifier(workers=2, timeout_s=5, group_timeout_s=60) as v:
        yield v


@pytest.mark.parametrize("name", sources.BENCHMARKS)
def test_every_real_gold_verifies_against_itself(repo, verifier, name):
    recs = sources.load_vendored(name, repo / "data" / "vendor")
    grades = verifier.grade([(r.golds, [f"The answer is \\boxed{{{r.answer}}}."]) for r in recs])
    failed = [r.answer for r, g in zip(recs, grades) if not g.items[0].correct]
    assert failed == []


@pytest.mark.parametrize(
    "gold,response",
    [
        ("42", "\\boxed{41}"),
        ("\\frac{14}{3}", "\\boxed{\\frac{3}{14}}"),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\boxed{(3, \\pi)}"),
        ("p - q", "\\boxed{q - p}"),
        ("90^\\circ", "\\boxed{45^\\circ}"),
        ("\\text{Evelyn}", "\\boxed{\\text{Bob}}"),
    ],
)
def test_non_equivalent_pairs_are_rejected(gold, response):
    g = grade_group([gold], [response])
    assert g.items[0].correct is False and g.items[0].status == OK


def test_equivalent_forms_are_accepted():
    g = grade_group(["\\frac{1}{2}"], ["\\boxed{0.5}", "so the answer is \\boxed{\\dfrac{1}{2}}", "\\boxed{2/4}"])
    assert [it.correct for it in g.items] == [True, True, True]


def test_last_boxed_answer_wins():
    g = grade_group(["7"], ["first \\boxed{3}, then corrected: \\boxed{7}"])
    assert g.items[0].correct


def test_alt_answers_count():
    g = grade_group(["6630.65", "6630"], ["\\boxed{6630}"])
    assert g.items[0].correct


def test_no_answer_counted():
    g = grade_group(["5"], ["I do not know."])
    assert g.items[0].status == NO_ANSWER and not g.items[0].correct


def test_majority_vote_clusters_equivalent_answers():
    # 0.5 and 1/2 form the largest cluster (2) against 3 (1): majority correct.
    g = grade_group(["\\frac{1}{2}"], ["\\boxed{3}", "\\boxed{0.5}", "\\boxed{\\frac{1}{2}}", "nothing"])
    assert g.majority_correct
    # Tie between 3 and 4: the earliest cluster (3) wins, which is wrong.
    g = grade_group(["4"], ["\\boxed{3}", "\\boxed{4}"])
    assert not g.majority_correct
    g = grade_group(["4"], ["no", "none"])
    assert not g.majority_correct


def test_pool_counts_statuses(verifier):
    before = verifier.counts.total
    verifier.grade([(["2"], ["\\boxed{2}", "no answer here"])])
    assert verifier.counts.total == before + 2
    assert verifier.counts.by_status[NO_ANSWER] >= 1


R1_RESPONSE = ("<think>\nLet me try: maybe \\boxed{3}? No wait, 2+2 is 4, so the answer is 4.\n</think>\n\n"
               "The sum is $2+2=4$.\n\n\\boxed{4}")


def test_answer_after_think_ignores_a_boxed_guess_in_the_thinking():
    from rlvr.grading.grades import answer_part

    assert answer_part(R1_RESPONSE, "</think>").startswith("\n\nThe sum is")
    assert answer_part("<think>never finished \\boxed{4}", "</think>") == ""
    assert answer_part(R1_RESPONSE, None) == R1_RESPONSE
    # a second </think> ends the answer, as in DisCO's split("</think>")[1]
    assert answer_part("<think>a</think> \\boxed{1} </think> \\boxed{2}", "</think>") == " \\boxed{1} "
    g = grade_group(["1"], ["<think>a</think> \\boxed{1} </think> then \\boxed{2}"], answer_after="</think>")
    assert g.items[0].correct
    # the thinking's \boxed{3} would count without the marker if it were last; here the final box wins either way
    g = grade_group(["3"], [R1_RESPONSE, "<think>so \\boxed{3}</think> I am not sure."], answer_after="</think>")
    assert [it.correct for it in g.items] == [False, False]
    assert [it.status for it in g.items] == [OK, NO_ANSWER]
    g = grade_group(["3"], ["<think>so \\boxed{3}</think> I am not sure."])
    assert g.items[0].correct  # without the marker the guess inside the thinking counts


def test_answer_after_reaches_the_pool():
    with Verifier(workers=1, timeout_s=5, answer_after="</think>") as v:
        g = v.grade([(["4"], [R1_RESPONSE, "<think>\\boxed{4}"])])[0]
    assert [it.correct for it in g.items] == [True, False]


# ---- several boxes as one final answer ----------------------------------------


@pytest.mark.parametrize(
    "gold,response",
    [
        ("\\{-2, 1\\}", "\\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}"),
        ("-2, 1", "\\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}"),
        ("(2, 2), (6, 2)", "\\boxed{(2, 2)} and \\boxed{(6, 2)}"),
        ("1, 2, 3", "So the roots are $\\boxed{1}$, $\\boxed{2}$ and $\\boxed{3}$."),
        ("x = 2 \\text{ or } x = 3", "\\[\\boxed{x = 2} \\text{ or } \\boxed{x = 3}\\]"),
    ],
)
def test_a_final_run_of_boxes_is_one_answer(gold, response):
    g = grade_group([gold], [response])
    assert g.items[0].correct and g.items[0].status == OK


@pytest.mark.parametrize(
    "gold,response",
    [
        # a draft box, then words, then the final box: only the final box is the answer
        ("-2, 1", "First guess \\boxed{-2}; checking again, the answer is \\boxed{1}"),
        ("-2, 1", "\\boxed{3}"),  # a single wrong box
        ("-2, 1", "\\boxed{-2} and \\boxed{2}"),  # one member of the run is wrong
        ("1", "\\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}"),  # a set is not one of its members
    ],
)
def test_boxes_that_do_not_form_the_gold_are_wrong(gold, response):
    assert not grade_group([gold], [response]).items[0].correct


def test_a_draft_box_before_other_text_is_not_part_of_the_answer():
    g = grade_group(["1"], ["First guess \\boxed{-2}; checking again, the answer is \\boxed{1}"])
    assert g.items[0].correct and g.items[0].extracted == "1"


# ---- a comparison that raises -------------------------------------------------


@pytest.mark.parametrize("golds", [["12:00", "12"], ["12", "12:00"]])
def test_a_raising_gold_does_not_stop_the_other_golds(golds):
    g = grade_group(golds, ["\\boxed{12}"])
    assert g.items[0].correct and g.items[0].status == OK


def test_raising_comparisons_fall_back_to_the_extracted_text_and_are_counted():
    # 12:00 parses to complex infinity on both sides; sympy cannot compare it
    g = grade_group(["12:00"], ["\\boxed{12:00}", "\\boxed{1:00}", "so \\boxed{12:00}"])
    assert [it.correct for it in g.items] == [True, False, True]
    assert [it.status for it in g.items] == [OK, ERROR, OK]  # wrong after a failed comparison: error
    assert [it.compare_errors for it in g.items] == [1, 1, 1]
    assert g.majority_correct  # the clustering uses the same fallback


def test_pool_counts_comparison_errors(verifier):
    before = verifier.counts.summary()
    verifier.grade([(["12:00", "12"], ["\\boxed{12}", "\\boxed{1:00}"])])
    after = verifier.counts.summary()
    assert after["compare_errors"] - before["compare_errors"] == 2
    assert after["errors"] - before["errors"] == 1


# ---- percentages and thousands separators -------------------------------------


@pytest.mark.parametrize(
    "gold,response,correct",
    [
        ("62.5%", "\\boxed{62.5\\%}", True),  # OlympiadBench style gold
        ("62.5%", "\\boxed{62.5}", True),  # a bare number with %: the answer may drop it
        ("62.5%", "\\boxed{0.625}", True),  # math-verify's own reading of 62.5% still counts
        ("8 \\%", "\\boxed{8\\%}", True),
        ("\\frac{25}{2}\\%", "\\boxed{12.5\\%}", True),  # both percentages
        ("\\frac{25}{2}\\%", "\\boxed{12.5}", False),  # not a bare number, and the answer has no %
        ("62.5%", "\\boxed{0.625\\%}", False),
        ("62.5%", "\\boxed{60\\%}", False),
        ("1000", "\\boxed{1{,}000}", True),
        ("1000", "\\boxed{1\\,000}", True),
        ("1,000", "\\boxed{1000}", True),
        ("69,84", "\\boxed{6984}", False),  # a list, not a number with a separator
    ],
)
def test_percentages_and_thousands_separators(gold, response, correct):
    assert grade_group([gold], [response]).items[0].correct is correct


# ---- multiple choice ------------------------------------------------------------


@pytest.mark.parametrize(
    "gold,response,correct",
    [
        ("A", "The answer is A.", True),
        ("C", "Comparing the options, **Answer:** (C)", True),
        ("D", "so the answer is $\\textbf{(D)}$", True),
        ("B", "The answer is A.", False),
        ("A", "The answer is A. On reflection it is \\boxed{B}.", False),  # a box wins
    ],
)
def test_multiple_choice_answer_without_a_box(gold, response, correct):
    g = grade_group([gold], [response])
    assert g.items[0].correct is correct and g.items[0].status == OK


def test_answer_letter_is_read_only_for_letter_golds():
    assert grade_group(["A"], ["I cannot decide."]).items[0].status == NO_ANSWER
    assert grade_group(["5"], ["The answer is A."]).items[0].status == NO_ANSWER
