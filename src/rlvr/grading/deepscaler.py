"""DisCO's grader (`verifier.grader: deepscaler`), written from its official
code (Optimization-AI/DisCO, deepscaler/rewards/math_reward.py and
math_utils/utils.py): the text between the first and second `</think>`, its
last `\\boxed{}`, and Hendrycks' MATH normalization or a sympy difference
against each gold. Training rewards and evaluation grade alike.

Runs inside a grading worker (its time and memory limits); each comparison
also gets a SIGALRM limit, which the official code lacks.
"""

from __future__ import annotations

import re
import signal
from contextlib import contextmanager

from rlvr.grading.grades import EMPTY, NO_ANSWER, OK, TIMEOUT, Grade, GroupGrade, answer_part, majority_correct
from rlvr.grading.mathd import mathd_normalize

_UNITS = ["degree", "cm", "centimeter", "meter", "mile", "second", "minute", "hour", "day", "week", "month", "year",
          "foot", "feet", "inch", "yard"]
_BAD_SUBSTRINGS = ["^{", "^("]
_BAD_REGEXES = [r"\^[0-9]+\^", r"\^[0-9][0-9]+"]
_TUPLE_CHARS = "()[]"


def _is_float(num: str) -> bool:
    try:
        float(num)
        return True
    except ValueError:
        return False


def _is_int(x: float) -> bool:
    try:
        return abs(x - int(round(x))) <= 1e-7
    except (OverflowError, ValueError):
        return False


def _is_frac(expr: str) -> bool:
    return bool(re.search(r"^-?[0-9]+.?/0*[1-9][0-9]*.?$", expr))


def _strip_commas(expr: str) -> str:
    """Thousands separators only, never a tuple's commas."""
    pattern = re.compile(r"(\d)(,)(\d\d\d)($|\D)")
    while True:
        nxt = pattern.sub(r"\1\3\4", expr)
        if nxt == expr:
            return nxt
        expr = nxt


def _str_is_int(x: str) -> bool:
    try:
        return _is_int(float(_strip_commas(x)))
    except ValueError:
        return False


def _latex_to_text(expr: str) -> str:
    from pylatexenc import latex2text

    expr = expr.replace("\\tfrac", "\\frac").replace("\\dfrac", "\\frac").replace("\\frac", " \\frac")
    expr = latex2text.LatexNodes2Text().latex_to_text(expr)
    for a, b in (("√", "sqrt"), ("π", "pi"), ("∞", "inf"), ("∪", "U"), ("·", "*"), ("×", "*")):
        expr = expr.replace(a, b)
    return expr.strip()


def deepscaler_normalize(expr: str | None) -> str | None:
    """utils.py `_normalize`: the form grade_answer_sympy compares."""
    if expr is None:
        return None
    m = re.search(r"^\\text\{(?P<text>.+?)\}$", expr)
    if m is not None:
        expr = m.group("text")
    expr = expr.replace("\\%", "%").replace("\\$", "$").replace("$", "").replace("%", "")
    expr = expr.replace(" or ", " , ").replace(" and ", " , ")
    expr = expr.replace("million", "*10^6").replace("billion", "*10^9").replace("trillion", "*10^12")
    for unit in _UNITS:
        expr = re.sub(f"{unit}(es)?(s)? *(\\^[0-9]+)?", "", expr)
    expr = re.sub(r"\^ *\\circ", "", expr)
    if expr and expr[0] == "{" and expr[-1] == "}":
        expr = expr[1:-1]
    expr = re.sub(r",\\! *", "", expr)
    if _is_float(expr) and _is_int(float(expr)):
        expr = str(int(round(float(expr))))
    if "\\" in expr:
        try:
            expr = _latex_to_text(expr)
        except Exception:  # noqa: BLE001  as the official code
            pass
    expr = re.sub("- *", "-", expr)
    expr = re.sub("([0-9]) +([0-9])", r"\1+\2", expr)  # a mixed number, 7 3/4 -> 7+3/4
    expr = expr.replace(" ", "").replace("{", "").replace("}", "").lower()
    if _str_is_int(expr):
        expr = str(int(float(expr.replace(",", ""))))
    return expr


def _allow_eval(expr: str) -> bool:
    letters = {c for c in expr.replace("sqrt", "").replace("frac", "") if c.isalpha()}
    return (len(letters) <= 2 and not any(s in expr for s in _BAD_SUBSTRINGS)
            and not any(re.search(r, expr) for r in _BAD_REGEXES))


def _equal_under_sympy(gold: str, given: str) -> bool:
    import sympy
    from sympy.parsing import sympy_parser

    expr = f"({gold})-({given})"
    if not _allow_eval(expr):
        return False
    try:
        transformations = sympy_parser.standard_transformations + (sympy_parser.implicit_multiplication_application,)
        return sympy.simplify(sympy_parser.parse_expr(expr.replace("^", "**"), transformations=transformations)) == 0
    except TimeoutError:
        raise
    except Exception:  # noqa: BLE001  as the official code: an unparsable difference is not equal
        return False


def _split_tuple(expr: str) -> list[str]:
    expr = _strip_commas(expr)
    if not expr:
        return []
    if (len(expr) > 2 and expr[0] in _TUPLE_CHARS and expr[-1] in _TUPLE_CHARS
            and all(c not in expr[1:-1] for c in _TUPLE_CHARS)):
        return [e.strip() for e in expr[1:-1].split(",")]
    return [expr]


def grade_sympy(given: str, gold: str) -> bool:
    """utils.py `grade_answer_sympy`."""
    gold_n, given_n = deepscaler_normalize(gold), deepscaler_normalize(given)
    if gold_n is None:
        return False
    if gold_n == given_n:
        return True
    if not given_n:
        return False
    gold_elems, given_elems = _split_tuple(gold_n), _split_tuple(given_n)
    if len(gold_elems) > 1 and (gold_n[0] != given_n[0] or gold_n[-1] != given_n[-1]):
        return False
    if len(gold_elems) != len(given_elems):
        return False
    for g, a in zip(gold_elems, given_elems):
        if _is_frac(g) and _is_frac(a):
            ok = g == a  # an unreduced fraction is not the reduced one
        elif _str_is_int(g) != _str_is_int(a):
            ok = False  # an integer gold needs an exact match
        else:
            ok = _equal_under_sympy(g, a)
        if not ok:
            return False
    return True


def grade_mathd(given: str, gold: str) -> bool:
    return mathd_normalize(gold) == mathd_normalize(given)


def last_boxed(text: str) -> str | None:
    """utils.py `extract_answer`: the last \\boxed{...} (or \\fbox{...}), its braces balanced."""
    if "\\boxed" not in text:
        return None
    idx = text.rfind("\\boxed")
    depth = 0
    for i in range(idx, len(text)):
        depth += text[i] == "{"
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                box = text[idx:i + 1]
                return box[len("\\boxed{"):-1] if box.startswith("\\boxed{") else None
    return None


def _deepscaler_same(a: str, b: str) -> bool:
    return grade_mathd(a, b) or grade_sympy(a, b)


def deepscaler_group(golds: list[str], responses: list[str], timeout_s: int, answer_after: str | None) -> GroupGrade:
    """math_reward.py `RewardMathFn`: no `</think>` or no box is no answer; the
    answer is correct when it equals a gold by mathd normalization or sympy."""
    golds = [g for g in (last_boxed(g) if "\\boxed" in g else g for g in golds) if g is not None]
    items, answers = [], []
    for text in responses:
        answer = last_boxed(answer_part(text, answer_after))
        if answer is None:  # no box, or an unbalanced one (TRPA's level 4)
            items.append(Grade(False, "", NO_ANSWER))
            answers.append(None)
            continue
        if answer == "":  # an empty box: wrong, and told apart (TRPA's level 3); it still votes in maj@k
            items.append(Grade(False, "", EMPTY))
            answers.append(answer)
            continue
        try:
            with _time_limit(timeout_s):
                correct = any(_deepscaler_same(answer, g) for g in golds)
            items.append(Grade(correct, answer[:200], OK))
        except TimeoutError:
            items.append(Grade(False, answer[:200], TIMEOUT))
        answers.append(answer)
    return GroupGrade(items, majority_correct(items, answers, lambda a, b: _same_within(a, b, timeout_s)))


def _same_within(a: str, b: str, timeout_s: int) -> bool:
    """maj@k's equality: a comparison that runs out of time is not equal."""
    try:
        with _time_limit(timeout_s):
            return _deepscaler_same(a, b)
    except TimeoutError:
        return False


@contextmanager
def _time_limit(seconds: int):
    """SIGALRM on the worker's main thread: sympy.simplify can run for minutes."""
    def stop(signum, frame):
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
