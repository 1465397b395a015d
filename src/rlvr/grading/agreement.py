"""How far the graders agree (verifier.grader): ours against each paper's own,
on the evaluation samples of this run and on synthetic R1-style endings built
from the six benchmarks' golds, each ending of a kind whose intended verdict
is known (one box, several boxes, a box in the thinking then another, no box,
a percentage, a fraction as a decimal).

The grader_agreement stage writes the counts (reports/grader_agreement.json);
the report prints them in its appendix.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

from rlvr.data.records import read_records
from rlvr.data.sources import load_vendored
from rlvr.grading.answer_forms import MATH, form_of
from rlvr.grading.pool import Verifier
from rlvr.settings.datasets import BENCHMARKS

OURS, OFFICIAL = "math_verify", ("deepscaler", "siren_official")
THINK = "</think>"
PER_KIND = 50  # synthetic endings per kind (fewer where fewer golds fit the kind)
EXAMPLES = 3


# ---- synthetic endings -----------------------------------------------------------


def _top_level_parts(answer: str) -> list[str]:
    """'-2, 1' -> ['-2', '1']; '(3, \\frac{\\pi}{2})' stays one part (a tuple)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(answer):
        depth += c in "({["
        depth -= c in ")}]"
        if c == "," and depth == 0:
            parts.append(answer[start:i].strip())
            start = i + 1
    return [p for p in [*parts, answer[start:].strip()] if p]


def _decimal(answer: str) -> str | None:
    """A fraction gold with a terminating decimal, written as that decimal."""
    m = re.fullmatch(r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}", answer.strip())
    if not m or int(m.group(3)) == 0:
        return None
    value = Fraction(int(m.group(2)), int(m.group(3)))
    rest = value.denominator
    for p in (2, 5):
        while rest % p == 0:
            rest //= p
    if rest != 1 or value.denominator == 1:
        return None
    return m.group(1) + str(Decimal(value.numerator) / Decimal(value.denominator))  # exact: 2s and 5s only


_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def _wrong(answer: str) -> str:
    return str(int(answer) + 1) if re.fullmatch(r"-?\d+", answer) else "0"


def _thought(text: str) -> str:
    return f"<think>\nLet me work through the problem. {text}\n{THINK}\n\n"


def _ending(kind: str, answer: str) -> str | None:
    """An R1-style response of `kind` whose final answer is `answer`, or None where the kind does not fit."""
    if kind == "one_box":
        return _thought("") + f"So the final answer is $\\boxed{{{answer}}}$."
    if kind == "several_boxes":
        if _THOUSANDS.fullmatch(answer.replace("\\!", "").replace("\\$", "").replace(" ", "")):
            return None  # 10,\!080 is one number, not two answers
        parts = _top_level_parts(answer)
        return _thought("") + "The solutions are " + " and ".join(f"$\\boxed{{{p}}}$" for p in parts) + "." \
            if len(parts) > 1 else None
    if kind == "box_in_thinking":
        return _thought(f"Maybe $\\boxed{{{_wrong(answer)}}}$? No, let me recheck.") + \
            f"The answer is $\\boxed{{{answer}}}$."
    if kind == "gold_only_in_thinking":  # the one kind whose intended verdict is wrong
        return _thought(f"Maybe $\\boxed{{{answer}}}$? No, let me recheck.") + \
            f"The answer is $\\boxed{{{_wrong(answer)}}}$."
    if kind == "no_box":
        return _thought("") + f"The answer is ${answer}$."
    if kind == "percent":
        number = answer.replace("\\%", "%")
        return _thought("") + f"The answer is $\\boxed{{{number[:-1]}\\%}}$." \
            if number.endswith("%") and re.fullmatch(r"-?[\d.]+", number[:-1]) else None
    if kind == "decimal":
        decimal = _decimal(answer)
        return _thought("") + f"The answer is $\\boxed{{{decimal}}}$." if decimal else None
    raise ValueError(kind)


KINDS = ("one_box", "several_boxes", "box_in_thinking", "no_box", "percent", "decimal", "gold_only_in_thinking")
WRONG_KINDS = ("gold_only_in_thinking",)  # a careful reader marks these wrong, every other kind correct


def synthetic_endings(vendor_dir: str | Path) -> list[dict]:
    """Up to PER_KIND endings per kind, each {kind, benchmark, id, golds, response}."""
    records = [(name, r) for name in BENCHMARKS for r in load_vendored(name, vendor_dir)]
    out = []
    for kind in KINDS:
        made = 0
        for name, r in records:
            response = _ending(kind, r.answer)
            if response is None:
                continue
            out.append({"kind": kind, "benchmark": name, "id": r.id, "golds": r.golds, "response": response})
            made += 1
            if made == PER_KIND:
                break
    return out


# ---- the run's own samples --------------------------------------------------------


def run_samples(eval_root: Path, eval_dir: Path) -> list[dict]:
    """Every evaluated response of this run, with its problem's golds (alternative forms too)."""
    records = {}
    for path in sorted(Path(eval_dir).glob("*.jsonl")):
        records.update({(path.stem, r.id): r for r in read_records(path)})
    rows = []
    for path in sorted(Path(eval_root).rglob("samples.jsonl")):
        for line in path.read_text().splitlines():
            s = json.loads(line)
            r = records.get((s["benchmark"], s["id"]))
            rows.append({"golds": r.golds if r else [s["gold"]], "response": s["response"],
                         "benchmark": s["benchmark"], "id": s["id"],
                         # graded as the run graded it: its question and its task's answer form
                         "question": r.problem if r else "", "form": form_of(r.source, r.answer_form) if r else MATH})
    return rows


# ---- grading and counting ------------------------------------------------------------


def verdicts(rows: list[dict], grader: str, answer_after: str | None, workers: int) -> list[bool]:
    with Verifier(workers=workers, answer_after=answer_after, grader=grader) as v:
        groups = v.grade([(r["golds"], [r["response"]], r.get("question", ""), r.get("form", MATH)) for r in rows],
                         desc=f"grade with {grader}")
    return [g.items[0].correct for g in groups]


def compare(rows: list[dict], answer_after: str | None, workers: int) -> dict:
    """Our verdicts against each official grader's: the 2 x 2 counts and a few disagreements.
    Each grader reads the span its own code reads: SIREN's the whole response, the others
    after answer_after."""
    ours = verdicts(rows, OURS, answer_after, workers)
    result = {"n": len(rows), "correct": {OURS: sum(ours)}, "pairs": {}}
    if rows and "kind" in rows[0]:
        result["by_kind"] = {k: {"n": sum(r["kind"] == k for r in rows),
                                 OURS: sum(v for r, v in zip(rows, ours) if r["kind"] == k)} for k in KINDS}
    for grader in OFFICIAL:
        theirs = verdicts(rows, grader, None if grader == "siren_official" else answer_after, workers)
        result["correct"][grader] = sum(theirs)
        differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
        result["pairs"][grader] = {
            "both": sum(a and b for a, b in zip(ours, theirs)),
            "ours_only": sum(a and not b for a, b in zip(ours, theirs)),
            "theirs_only": sum(b and not a for a, b in zip(ours, theirs)),
            "neither": sum(not a and not b for a, b in zip(ours, theirs)),
            "examples": [{"golds": rows[i]["golds"], "response": rows[i]["response"][-300:], "ours": ours[i],
                          "theirs": theirs[i], **({"kind": rows[i]["kind"]} if "kind" in rows[i] else {})}
                         for i in _spread(differ, EXAMPLES)],
        }
        if "by_kind" in result:
            for k in KINDS:
                result["by_kind"][k][grader] = sum(v for r, v in zip(rows, theirs) if r["kind"] == k)
    return result


def _spread(indices: list[int], n: int) -> list[int]:
    """n indices spread over the list (the first, the middle, the last), not n neighbours."""
    if len(indices) <= n:
        return indices
    return [indices[round(j * (len(indices) - 1) / (n - 1))] for j in range(n)]


def agreement(eval_root: Path, eval_dir: Path, vendor_dir: Path, answer_after: str | None, workers: int) -> dict:
    return {"run_samples": compare(run_samples(eval_root, eval_dir), answer_after, workers),
            "synthetic": compare(synthetic_endings(vendor_dir), THINK, workers),
            "answer_after": answer_after}
