"""SIREN's grader (`verifier.grader: siren_official`), written from its
official code (Linn3a/siren, recipe/entropy/reward_score.py and
eval/eval_entropy.py): math-verify on the whole response, the parsed
response as verify's first argument.

Runs inside a grading worker (its time and memory limits).
"""

from __future__ import annotations

from math_verify import parse, verify

from rlvr.grading.grades import ERROR, NO_ANSWER, OK, Grade, GroupGrade, answer_part


def siren_group(golds: list[str], responses: list[str], timeout_s: int, answer_after: str | None) -> GroupGrade:
    """eval_entropy.py: parse the whole response, box the gold unless it is
    boxed, verify(prediction, gold) (the prediction first, as the official
    call); an exception is a wrong answer (reward_score.py)."""
    boxed = [parse(g if "boxed" in g else f"\\boxed{{{g}}}") for g in golds]
    items, parsed = [], []
    for text in responses:
        try:
            pred = parse(answer_part(text, answer_after))
        except Exception:  # noqa: BLE001
            pred = []
        if not pred:
            items.append(Grade(False, "", NO_ANSWER))
            parsed.append(None)
            continue
        correct, status = False, OK
        for gold in boxed:
            try:
                correct = bool(verify(pred, gold, timeout_seconds=timeout_s))
            except Exception:  # noqa: BLE001  the official reward scores an exception 0
                status = ERROR
            if correct:
                break
        items.append(Grade(correct, str(pred[-1])[:200], OK if correct else status))
        parsed.append(pred)
    return GroupGrade(items, _siren_majority(parsed, boxed, timeout_s))


def _siren_majority(parsed: list, golds: list, timeout_s: int) -> bool:
    """eval_entropy.py `get_most_common`: a prediction joins the first key it
    verifies against (keys are extracted strings: the prediction's second
    extraction, else its first), the most frequent key (the first on ties)
    is boxed, parsed and verified against the gold."""
    counts: dict = {}
    for pred in parsed:
        if not pred:
            continue
        key = next((k for k in counts if verify(pred, k, timeout_seconds=timeout_s)), None)
        if key is None:
            counts[pred[1] if len(pred) > 1 else pred[0]] = 1
        else:
            counts[key] += 1
    if not counts:
        return False
    majority = parse(f"\\boxed{{{max(counts, key=counts.get)}}}")
    try:
        return bool(majority) and any(verify(majority, gold, timeout_seconds=timeout_s) for gold in golds)
    except Exception:  # noqa: BLE001  the official scores an exception 0
        return False
