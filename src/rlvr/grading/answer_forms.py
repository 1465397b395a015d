"""What a task states its final answer to be, and what of a response counts as that answer.

RL finds every hole in a grader. math-verify reads the last expression of an
unboxed response and evaluates it, so for gold 8 the response "To find 7 + 1, we
..." restates the question and is graded 8. Two rules close that hole:

- A task states the form of its final answer (`answer_form`). The arithmetic
  task asks for a number: its final answer is the content of the last
  `\\boxed{}`, the text after the last "Answer:" marker, or the result after
  the last "=" of a written-out equation (whichever comes last), and it must
  be a numeric literal. An expression ("7 + 1", boxed or
  not) is not a number and earns nothing, with every grader.
- Our grader (math_verify) never takes an answer that restates the problem:
  an extracted expression with an operator in it that is copied from the
  question earns nothing (`restates`).

Imports nothing heavy: the report classifies rewarded answers with it too.
"""

from __future__ import annotations

import re

from rlvr.data.boxes import last_box
from rlvr.settings.datasets import ANSWER_FORMS

NUMBER, MATH, CHOICE = ANSWER_FORMS  # the forms a dataset entry's answer_form names
# The form of each task's final answer; sets not named here are competition math (MATH).
TASK_FORMS = {"arithmetic": NUMBER}
ANSWER_MARKER = "Answer:"

_LITERAL = re.compile(r"[-−]?\d+(?:\.\d+)?")
_MARKER = re.compile(r"(?i:answer)(?:\s+is\s*:?|\s*:)")
# A binary operator between two operands: "7+1", "4 \times 5", "2^3"; a leading minus is no operator.
_OPERATOR = re.compile(r"(?<=[\w)}\].])\s*(?:[+\-*/^=×÷·]|\\times|\\cdot|\\div|\\pm)")
_SPACING = re.compile(r"\s+|\\[,;:! ]|\\left|\\right|\$")
_SYNONYMS = ((r"\times", "*"), (r"\cdot", "*"), ("×", "*"), ("·", "*"), (r"\div", "/"), ("÷", "/"),
             (r"\dfrac", r"\frac"), (r"\tfrac", r"\frac"), ("−", "-"))


def form_of(source: str, stated: str | None = None) -> str:
    """The answer form of a record: the one its dataset entry states, else its set's."""
    return stated or TASK_FORMS.get(source, MATH)


def normalized(text: str) -> str:
    """The text with spacing, math delimiters and operator spellings made uniform, for copy checks."""
    text = _SPACING.sub("", text)
    for a, b in _SYNONYMS:
        text = text.replace(a, b)
    return text.rstrip(".")


def is_number(text: str) -> bool:
    return bool(_LITERAL.fullmatch(normalized(text)))


def has_operator(text: str) -> bool:
    return bool(_OPERATOR.search(normalized(text)))


def restates(answer: str, question: str) -> bool:
    """An answer that is an expression copied from the question ("7 + 1" for "Compute 7 + 1.")."""
    a = normalized(answer)
    return bool(a) and has_operator(a) and a in normalized(question)


def _after_marker(text: str) -> tuple[int, str] | None:
    """(start, text) after the last "Answer:" marker: up to the line's end or a sentence's end."""
    found = list(_MARKER.finditer(text))
    if not found:
        return None
    rest = text[found[-1].end():].split("\n", 1)[0]
    rest = re.split(r"\.(?:\s|$)", rest, maxsplit=1)[0].strip().strip("*").strip()
    # Nothing after it, or a box (the box's own place): this marker states nothing.
    return (found[-1].start(), rest) if rest and not rest.startswith("\\boxed") else None


def _after_equals(text: str) -> tuple[int, str] | None:
    """(start, text) after the last "=": the result of a written-out equation ("2 + 3 = 5")."""
    at = text.rfind("=")
    if at < 0:
        return None
    rest = re.split(r"\.(?:\s|$)|\n|,\s", text[at + 1 :], maxsplit=1)[0].strip().strip("*").strip()
    return (at, rest) if rest else None  # markdown's bold stripped, as after a marker ("**3 + 3 = 6**")


def stated_answer(text: str) -> str | None:
    """The final answer in the place the task states: the last box, the text after the
    last answer marker, or the result after the last "=", whichever comes last; None when
    the response has none of them."""
    places = [p for p in (last_box(text), _after_marker(text), _after_equals(text)) if p is not None]
    return max(places)[1].strip() if places else None


def number_answer(text: str) -> tuple[str | None, str]:
    """(the literal, '') when the stated answer is a number, else (None, what was stated)."""
    stated = stated_answer(text)
    if stated is None:
        return None, ""
    return (normalized(stated), stated) if is_number(stated) else (None, stated)


_CHOICE = re.compile(r"\(?([A-Za-z])\)")  # "(B)", "B)"
_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}")


def choice_letter(text: str) -> str | None:
    """The option letter a text names ("B", "(b)", "B)", "\\text{(B)}"), upper-cased, or None."""
    t = _WRAPPERS.sub(r"\1", text).replace("$", "").strip().rstrip(".").strip()
    if len(t) == 1 and t.isalpha():
        return t.upper()
    m = _CHOICE.fullmatch(t)
    return m.group(1).upper() if m else None


def choice_answer(text: str) -> tuple[str | None, str]:
    """(the letter, what was stated) when the stated answer is one option's letter, else (None, what was stated)."""
    stated = stated_answer(text)
    return (None, "") if stated is None else (choice_letter(stated), stated)


def kind_of_rewarded(extracted: str, golds: list[str], question: str) -> str:
    """What a rewarded answer is: the gold as written ('gold'), text copied from the
    question ('copied'), another expression ('expression'), or another form of the
    gold's value ('other', such as 0.5 for 1/2). The report's reward-hack audit."""
    if any(normalized(extracted) == normalized(g) for g in golds):
        return "gold"
    if restates(extracted, question):
        return "copied"
    return "expression" if has_operator(extracted) else "other"
