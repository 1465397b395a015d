import pytest

from rlvr.data import sources
from rlvr.rewards import NO_ANSWER, OK, Verifier, grade_group


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
    from rlvr.rewards import answer_part

    assert answer_part(R1_RESPONSE, "</think>").startswith("\n\nThe sum is")
    assert answer_part("<think>never finished \\boxed{4}", "</think>") == ""
    assert answer_part(R1_RESPONSE, None) == R1_RESPONSE
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
