"""Math-Verify's own graded pairs (tests/fixtures/math_verify_cases.json, Apache-2.0, source
commit in the file) run through our grading function, one response against its gold.

Every case must agree with its expected verdict, except the known differences below; a
known difference that starts agreeing fails too, so the list stays exact."""

import json

import pytest
from helpers import REPO

from rlvr.grading.math_verify_grader import grade_group

DATA = REPO / "tests" / "fixtures" / "math_verify_cases.json"
CASES = json.loads(DATA.read_text())["cases"]

# Our wrapper runs math-verify with its default comparison options and one extraction
# setup (LaTeX, boxes first, then plain expressions); upstream cases that change these differ.
_PRECISION = "needs verify(float_rounding={}); our wrapper keeps the default 6"
_LATEX_ONLY = "extracts LaTeX only; our wrapper also extracts plain expressions and finds the 9"
# Dataset golds are bare LaTeX, so our gold parser wraps every gold in $...$; a gold that is
# already in $...$ becomes $$...$$, where a trailing % or \% leaves only a string.
_REWRAPPED_PERCENT = "gold is already in $...$ with a % sign: rewrapped, it parses to a string only"
_WORDS_BETWEEN_BOXES = "words other than joiners stand between the boxes, so only the final box is the answer"

KNOWN_DIFFERENCES = {
    "test_all.py::test_complex_math_expressions[7]": _PRECISION.format(2),
    "test_all.py::test_complex_math_expressions[13]": _PRECISION.format(2),
    "test_all.py::test_precision[from latex]": _PRECISION.format(4),
    "test_all.py::test_set_rel_assymetry[2]": "needs verify(allow_set_relation_comp=True)",
    "test_strict.py::test_strict_variable_comparison[1]": "needs verify(strict=False)",
    "test_all.py::test_latex_notation[5]": _LATEX_ONLY,
    "test_all.py::test_latex_notation[6]": _LATEX_ONLY,
    "test_all.py::test_number_extraction[6]": (
        "extracts plain expressions only, reading the gold 1,22 as a decimal comma; our gold parser reads "
        "LaTeX first, where 1,22 is the list {1, 22}"),
    "test_all.py::test_latex_notation_math[2]": (
        "fails upstream too with math-verify 0.9.0: latex2sympy2_extended 1.11.0 cannot parse the boxed 28\\%, "
        "and the gold is a whole solution, not a percentage, so our percent rewrite does not apply"),
    "test_all.py::test_math_extraction_additional_cases[8]": _REWRAPPED_PERCENT,
    **{f"test_all.py::test_percent_notation[{i}]": _REWRAPPED_PERCENT for i in range(6)},
    "test_yujianll.py::test_string_extraction[9]": (
        "upstream agrees only because both sides are cut to 1 before \\mathrm{e}; our rewrapped gold parses "
        "to a string only"),
    "test_open_thoughts.py::test_open_thoughts[14]": _WORDS_BETWEEN_BOXES + " ('for part (a)')",
    "test_open_thoughts.py::test_open_thoughts[24]": _WORDS_BETWEEN_BOXES + " ('y_2 =')",
    "test_open_thoughts.py::test_open_thoughts[28]": (
        "the gold holds two boxes with words between; inside the $...$ our gold parser adds, math-verify "
        "reads every box of one math environment (upstream: the last box only). Gold side only"),
}


def test_data_names_its_source_and_license():
    doc = json.loads(DATA.read_text())
    assert doc["source"] == "https://github.com/huggingface/Math-Verify" and len(doc["commit"]) == 40
    assert (DATA.parent / "MATH_VERIFY_LICENSE").read_text().lstrip().startswith("Apache License")
    assert len({c["id"] for c in CASES}) == len(CASES)


def test_known_differences_are_cases():
    assert set(KNOWN_DIFFERENCES) <= {c["id"] for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_math_verify_case(case):
    grade = grade_group([case["gold"]], [case["prediction"]]).items[0]
    if case["id"] in KNOWN_DIFFERENCES:
        assert grade.correct != case["expected"], "now agrees: remove it from KNOWN_DIFFERENCES"
    else:
        assert grade.correct == case["expected"]
