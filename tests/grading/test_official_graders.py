"""The papers' own graders (verifier.grader), case by case as their official
code decides, and where they part from ours."""

import pytest

from rlvr.grading.deepscaler import deepscaler_group, grade_mathd, grade_sympy, last_boxed
from rlvr.grading.grades import NO_ANSWER, OK
from rlvr.grading.math_verify_grader import grade_group
from rlvr.grading.pool import Verifier
from rlvr.grading.siren_official import siren_eval_group, siren_reward_group
from rlvr.schema import ConfigError
from rlvr.settings.load import parse_params


def deepscaler(gold, response, answer_after="</think>"):
    return deepscaler_group([gold], [response], 5, answer_after).items[0]


def siren(gold, response):
    """SIREN's evaluation half (eval_entropy.py)."""
    return siren_eval_group([gold], [response], 5, None).items[0]


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
    g = siren_eval_group(["4"], ["\\boxed{4}", "\\boxed{3}", "\\boxed{4.0}", "\\boxed{3}", "\\boxed{4}"], 5, None)
    assert g.majority_correct and sum(it.correct for it in g.items) == 3
    g = siren_eval_group(["4"], ["\\boxed{3}", "\\boxed{3}", "\\boxed{4}"], 5, None)
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


# ---- SIREN's two halves against its official functions, run side by side -----------------------------


def official_siren_reward(solution_str: str, ground_truth: str) -> float:
    """Linn3a/siren recipe/entropy/reward_score.py lines 4-17 (reward_func), its score."""
    from math_verify import parse, verify

    try:
        acc = verify(parse(solution_str), parse(ground_truth))
    except Exception:  # noqa: BLE001
        acc = 0
    return float(acc)


def official_siren_eval(response: str, gold) -> bool:
    """Linn3a/siren eval/eval_entropy.py lines 86-90 and 143-167: the first gold,
    boxed unless it holds "boxed", verify(parse(response), gold)."""
    from math_verify import parse, verify

    gold = str(gold[0] if isinstance(gold, list) else gold)
    gold_extracted = parse(gold) if "boxed" in gold else parse("\\boxed{{{}}}".format(gold))
    try:
        pred = parse(response)
    except Exception:  # noqa: BLE001
        pred = response
    return bool(verify(pred, gold_extracted))


BARE_GOLDS = ["\\frac{\\sqrt{3}}{2}", "3\\sqrt{2}", "2\\pi", "\\left( 3, \\frac{\\pi}{2} \\right)",
              "(-\\infty, 2]", "\\text{even}", "a^2+b^2", "204", "\\frac{1}{2}", "(1,2)", "x^2+1"]


def test_a_bare_gold_that_parses_to_nothing_earns_no_training_reward_as_officially():
    """SIREN's training reward parses the gold as stored: \\frac{\\sqrt{3}}{2}
    parses to nothing, so even the exact answer is 0 (official 0, ours 0); its
    evaluation boxes the gold first, so there the same answer is correct."""
    gold, response = "\\frac{\\sqrt{3}}{2}", "so \\boxed{\\frac{\\sqrt{3}}{2}}"
    assert official_siren_reward(response, gold) == 0.0
    assert siren_reward_group([gold], [response], 5, None).items[0].correct is False
    assert official_siren_eval(response, gold) is True and siren(gold, response).correct is True


@pytest.mark.parametrize("gold", BARE_GOLDS)
@pytest.mark.parametrize("answer", ["GOLD", "3", "2", "\\frac{1}{2}", "0.5"])
def test_sirens_halves_equal_its_official_functions(gold, answer):
    response = f"The work. The answer is \\boxed{{{answer.replace('GOLD', gold)}}}."
    assert float(siren_reward_group([gold], [response], 5, None).items[0].correct) == \
        official_siren_reward(response, gold)
    assert siren(gold, response).correct is official_siren_eval(response, gold)


def test_sirens_halves_on_the_vendored_math_golds(repo):
    """Side by side on 200 MATH training golds, each answered exactly and wrongly:
    the port equals the official functions on every one (and the training half
    rejects some exact answers, as officially: the bare golds it cannot parse)."""
    from rlvr.data import sources

    records = sources.load_vendored("math_train", repo / "data" / "vendor")[::37][:200]
    rejected = 0
    for r in records:
        for response in (f"\\boxed{{{r.answer}}}", "\\boxed{12345}"):
            official = official_siren_reward(response, r.answer)
            assert float(siren_reward_group([r.answer], [response], 5, None).items[0].correct) == official, r.answer
            assert siren(r.answer, response).correct is official_siren_eval(response, r.golds), r.answer
            rejected += response != "\\boxed{12345}" and official == 0.0
    assert 0 < rejected < len(records) / 2


def test_sirens_evaluation_reads_only_the_first_gold():
    assert siren_eval_group(["4", "5"], ["\\boxed{5}"], 5, None).items[0].correct is False
    assert siren_eval_group(["4", "5"], ["\\boxed{4}"], 5, None).items[0].correct is True
