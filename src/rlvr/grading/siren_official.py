"""SIREN's grader (`verifier.grader: siren_official`), written from its
official code (Linn3a/siren), one function per half, since the two differ:

- training rewards (and validation during training, the same reward
  function in verl), recipe/entropy/reward_score.py lines 4-17:
  `verify(parse(response), parse(ground_truth))`, the gold parsed as stored
  (a bare `\\frac{\\sqrt{3}}{2}` parses to nothing, so no response earns it);
  an exception is 0;
- evaluation, eval/eval_entropy.py lines 86-90 and 143-167: the first gold
  only, boxed unless it holds "boxed", `verify(parse(response), gold)`.

Both parse the whole response and put the prediction first in verify (the
official order; math-verify reads its first argument as the gold). Runs
inside a grading worker (its time and memory limits).
"""

from __future__ import annotations

from math_verify import parse, verify

from rlvr.grading.grades import ERROR, NO_ANSWER, OK, Grade, GroupGrade, answer_part


def siren_reward_group(golds: list[str], responses: list[str], timeout_s: int,
                       answer_after: str | None) -> GroupGrade:
    """reward_score.py: the gold as stored (the training set's one gold: the
    first), the whole response, verify(prediction, gold); an exception is 0."""
    return _siren_group(_parsed_gold(golds[0]), responses, timeout_s, answer_after)


def siren_eval_group(golds: list[str], responses: list[str], timeout_s: int, answer_after: str | None) -> GroupGrade:
    """eval_entropy.py: the first gold, boxed unless it is, then as the reward."""
    gold = golds[0]
    return _siren_group(_parsed_gold(gold if "boxed" in gold else f"\\boxed{{{gold}}}"), responses, timeout_s,
                        answer_after)


def _parsed_gold(text: str) -> list:
    try:
        return parse(text)
    except Exception:  # noqa: BLE001  the official call is inside its try: nothing matches it
        return []


def _siren_group(gold: list, responses: list[str], timeout_s: int, answer_after: str | None) -> GroupGrade:
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
        try:
            correct, status = bool(verify(pred, gold, timeout_seconds=timeout_s)), OK
        except Exception:  # noqa: BLE001  the official reward scores an exception 0
            correct, status = False, ERROR
        items.append(Grade(correct, str(pred[-1])[:200], status))
        parsed.append(pred)
    return GroupGrade(items, _siren_majority(parsed, [gold], timeout_s))


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
