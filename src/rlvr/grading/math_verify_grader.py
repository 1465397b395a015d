"""Our grader (`verifier.grader: math_verify`): math-verify, with the answer
text rewritten first where math-verify 0.9.0 / latex2sympy2_extended 1.11.0
misread it (a final run of several boxes, thousands separators, percentages,
a lone answer letter).

Runs inside a grading worker (rlvr.grading.worker): model text is untrusted,
and math-verify's own SIGALRM limits work only on a process's main thread.
"""

from __future__ import annotations

import re

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from math_verify.errors import TimeoutException

from rlvr.grading.answer_forms import restates
from rlvr.grading.grades import (
    ERROR,
    NO_ANSWER,
    OK,
    RESTATED,
    TIMEOUT,
    TOO_LONG,
    Grade,
    GroupGrade,
    answer_part,
    majority_correct,
)

# What math-verify parses of a response: its final boxes and the text after them, or the
# whole text without a box. Longer is no answer (TOO_LONG): a tail of it could be any value
# (the last 20,000 characters of a nested fraction are another fraction).
MAX_ANSWER_CHARS = 20_000


def _parse_gold(gold: str):
    parsed = parse(f"${gold}$")
    return parsed if parsed else parse(gold)


# ---- answer text: what of a response is parsed, and how golds are read -----------
#
# Written as text rewrites before math-verify sees either side, so math-verify and
# latex2sympy2_extended stay at their pinned versions (0.9.0 / 1.11.0).

_BOX = re.compile(r"\\boxed\s*\{")
# What may stand between two boxes of one final answer: commas, "and"/"or" (plain or in
# \text{}), spacing commands and math delimiters. Any other word makes the earlier box a draft.
_JOINER = re.compile(r"(?:\s|,|~|\band\b|\bor\b|\\q?quad\b|\\[,;:! ]|\\text\{[\s,]*(?:and|or)?[\s,]*\}"
                     r"|\$|\\[()\[\]])*")
_THOUSANDS = re.compile(r"-?[1-9]\d{0,2}(?:(?:\{,\}|\\,|,)\d{3})+")
_PERCENT = re.compile(r"(.*?)\s*\\?%")
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)")
_LETTER_GOLD = re.compile(r"\s*\(?([A-E])\)?\s*")
# "The answer is (B).", "**Answer:** C", "answer is $\textbf{(D)}$": the letter must stand alone.
_ANSWER_LETTER = re.compile(r"(?i:answer)(?:\s+is)?\s*:?[\s*$]*(?:\\text(?:bf)?\{)?\(?([A-E])\)?(?![A-Za-z0-9])")


def _plain_number(s: str) -> str:
    """1{,}000, 1\\,000 and 1,000 -> 1000. latex2sympy reads 1\\,000 as a product. Lists
    like 69,84 or 2500,7500 and decimal commas like 0,111 never match (a leading 1-3 digit
    group that is not 0, then groups of exactly three digits)."""
    s = s.strip()
    return re.sub(r"\{,\}|\\,|,", "", s) if _THOUSANDS.fullmatch(s) else s


def _strip_percent(s: str) -> str | None:
    """The answer without its trailing % or \\% (None when it has none). latex2sympy2_extended
    1.11.0 cannot parse a boxed 62.5\\% at all, and reads a gold 62.5% as 0.625 but 8 \\% as 8."""
    m = _PERCENT.fullmatch(s.strip())
    return _plain_number(m.group(1)) if m and m.group(1) else None


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every closed, non-nested \\boxed{...}, in order."""
    pairs, stack = {}, []
    for m in re.finditer(r"[{}]", text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    found, end = [], 0
    for m in _BOX.finditer(text):
        close = pairs.get(m.end() - 1)
        if close is not None and m.start() >= end:
            found.append((m.start(), close + 1, text[m.end():close]))
            end = close + 1
    return found


def _final_run(text: str) -> list[tuple[int, int, str]]:
    """The boxes of the final answer: the last box and the boxes before it that only
    joiners separate from it ("\\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}")."""
    boxes = _boxes(text)
    if not boxes or boxes[-1][0] != text.rfind("\\boxed"):
        return []  # the last \boxed is unclosed or nested: left to math-verify as it stands
    run = [boxes[-1]]
    for box in reversed(boxes[:-1]):
        if not _JOINER.fullmatch(text, box[1], run[0][0]):
            break
        run.insert(0, box)
    return run


def _final_answer(text: str, letter_gold: bool, strip_percent: bool = False) -> str:
    """The text math-verify parses for a response: its final run of boxes as one box (the
    set or tuple math-verify forms from "\\boxed{a, b}"); without a box, the letter of an
    "answer is (A)" when the gold is a letter, else the whole text."""
    run = _final_run(text)
    if not run:
        if "\\boxed" in text:
            return text[text.rfind("\\boxed"):]
        letters = _ANSWER_LETTER.findall(text) if letter_gold else []
        return f"\\boxed{{{letters[-1]}}}" if letters else text
    contents = [_plain_number(c) for _, _, c in run]
    if strip_percent:
        contents = [_strip_percent(c) or c for c in contents]
    contents = list(dict.fromkeys(contents))  # a repeated box is one answer, not a set of two
    return f"\\boxed{{{', '.join(contents)}}}{text[run[-1][1]:]}"


def _parse_response(text: str, timeout_s: int):
    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    return parse(text, extraction_config=config, parsing_timeout=timeout_s, raise_on_error=True)


# A gold's percent-free form counts against a percent-free answer, only when both were
# percentages or the gold is a bare number with % (62.5% vs \boxed{62.5}); an answer's
# percent-free form never meets the gold as written (0.625\% is not 62.5%).
_AS_WRITTEN, _PERCENT_FREE, _BARE_PERCENT = "as_written", "percent_free", "bare_percent"


def _parse_golds(golds: list[str]) -> list[tuple[list, str]]:
    """(parsed gold, how it was read) for each reading of each gold that parses."""
    readings = []
    for gold in golds:
        gold = _plain_number(gold)
        readings.append((gold, _AS_WRITTEN))
        bare = _strip_percent(gold)
        if bare is not None:
            readings.append((bare, _BARE_PERCENT if _NUMBER.fullmatch(bare) else _PERCENT_FREE))
    return [(p, how) for p, how in ((_parse_gold(g), how) for g, how in readings) if p]


def _against(how: str, pred, pred_no_percent):
    """The parsed answer a gold reading is compared with (None: this reading does not apply)."""
    if how == _AS_WRITTEN:
        return pred
    return pred_no_percent or (pred if how == _BARE_PERCENT else None)


def _compare(gold, pred, timeout_s: int) -> tuple[bool, str]:
    """(equal, problem): problem is TIMEOUT or ERROR when math-verify raised, '' otherwise.
    After an error the extracted strings are compared: 12:00 parses to complex infinity on
    both sides, and math-verify raises before it reaches its own string comparison."""
    try:
        return bool(verify(gold, pred, timeout_seconds=timeout_s, raise_on_error=True)), ""
    except TimeoutException:
        return False, TIMEOUT
    except Exception:  # noqa: BLE001  sympy raises anything on hostile input
        return _same_text(gold, pred), ERROR


def _same_text(a: list, b: list) -> bool:
    def texts(parsed):
        return {re.sub(r"\s+", "", x) for x in parsed if isinstance(x, str)} - {""}

    return bool(texts(a) & texts(b))


def _grade_answer(golds: list, pred, pred_no_percent, timeout_s: int) -> tuple[bool, list[str]]:
    """Is the answer any gold? Every reading is tried until one matches: a comparison that
    raises is counted and the next gold still gets its turn."""
    problems = []
    for gold, how in golds:
        target = _against(how, pred, pred_no_percent)
        if target is None:
            continue
        same, problem = _compare(gold, target, timeout_s)
        problems += [problem] if problem else []
        if same:
            return True, problems
    return False, problems


def _status(correct: bool, problems: list[str]) -> str:
    """A wrong verdict reached past a failed comparison is not a clean 'ok': the failed
    comparison might have matched."""
    if correct or not problems:
        return OK
    return TIMEOUT if TIMEOUT in problems else ERROR


def grade_group(golds: list[str], responses: list[str], timeout_s: int = 5,
                answer_after: str | None = None, question: str = "") -> GroupGrade:
    """Grade the k responses to one problem; runs inside a worker process. An
    answer that restates the question (an expression copied from it, "7 + 1" for
    "Compute 7 + 1.") is no answer of the response's own: RESTATED, never correct."""
    gold_parsed = _parse_golds(golds)
    letter_gold = any(_LETTER_GOLD.fullmatch(g) for g in golds)
    percent_gold = any(how != _AS_WRITTEN for _, how in gold_parsed)
    items, parsed = [], []
    for text in responses:
        try:
            item, pred = _grade_response(answer_part(text, answer_after), gold_parsed, letter_gold, percent_gold,
                                         timeout_s, question, golds)
        except TimeoutException:
            item, pred = Grade(False, "", TIMEOUT), None
        except Exception:  # noqa: BLE001  sympy raises anything on hostile input
            item, pred = Grade(False, "", ERROR), None
        items.append(item)
        parsed.append(pred)
    return GroupGrade(items, majority_correct(items, parsed, lambda a, b: _compare(a, b, timeout_s)[0]))


def _grade_response(text: str, golds: list, letter_gold: bool, percent_gold: bool, timeout_s: int,
                    question: str = "", gold_texts: list[str] = ()):
    """(Grade, parsed answer or None) of one response."""
    answer = _final_answer(text, letter_gold)
    if len(answer) > MAX_ANSWER_CHARS:
        return Grade(False, "", TOO_LONG), None
    pred = _parse_response(answer, timeout_s)
    if not pred:
        return Grade(False, "", NO_ANSWER), None
    extracted = str(pred[-1])
    if restates(extracted, question) and not any(restates(extracted, g) for g in gold_texts):
        return Grade(False, extracted[:200], RESTATED), None
    no_percent = _final_answer(text, letter_gold, strip_percent=True) if percent_gold else answer
    pred_no_percent = _parse_response(no_percent, timeout_s) if no_percent != answer else None
    correct, problems = _grade_answer(golds, pred, pred_no_percent, timeout_s)
    return Grade(correct, str(pred[-1])[:200], _status(correct, problems), len(problems)), pred
