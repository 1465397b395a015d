"""The reward-hack audit: what the rewarded answers of each method actually are.

RL finds every hole in a grader, and a score cannot show it: a model that
learned to restate "7 + 1" scores like one that learned to add. So per method
and set the report counts the rewarded samples by what the grader extracted
(rlvr.grading.answer_forms.kind_of_rewarded): the gold as written, another
form of the gold's value, an expression, or text copied from the question;
and it flags a method whose rewarded answers are mostly not the gold as
written, on a set where enough of them were rewarded to say so.
"""

from __future__ import annotations

from collections import Counter

from rlvr.grading.answer_forms import kind_of_rewarded
from rlvr.report.format import markdown

KINDS = ("gold", "other", "expression", "copied")
MIN_REWARDED = 20  # fewer rewarded samples on a set say too little to flag it
FLAG_BELOW = 0.5  # flagged: under half of the rewarded answers are the gold as written


def rewarded_kinds(samples: list[dict]) -> dict[str, Counter]:
    """Per set: how many rewarded samples are of each kind."""
    out: dict[str, Counter] = {}
    for s in samples:
        counts = out.setdefault(s["benchmark"], Counter())
        if s.get("correct"):
            counts[kind_of_rewarded(s.get("extracted") or "", [s["gold"], *(s.get("alt_golds") or [])],
                                    s.get("problem") or "")] += 1
    return out


def audit(samples_by_method: dict[str, list[dict]]) -> dict[str, dict[str, dict]]:
    """method -> set -> {rewarded, each kind's share, flagged}."""
    out = {}
    for method, samples in samples_by_method.items():
        for bench, counts in rewarded_kinds(samples).items():
            n = sum(counts.values())
            shares = {k: counts[k] / n if n else 0.0 for k in KINDS}
            out.setdefault(method, {})[bench] = {"rewarded": n, **shares,
                                                 "flagged": n >= MIN_REWARDED and shares["gold"] < FLAG_BELOW}
    return out


def flagged(table: dict[str, dict[str, dict]]) -> list[tuple[str, str]]:
    return [(m, b) for m, sets in table.items() for b, row in sets.items() if row["flagged"]]


def audit_section(table: dict[str, dict[str, dict]]) -> str | None:
    rows = [[m, b, str(row["rewarded"]), *(f"{row[k]:.2f}" for k in KINDS), "**flagged**" if row["flagged"] else ""]
            for m, sets in table.items() for b, row in sets.items()]
    if not rows:
        return None
    return ("Of each method's rewarded samples, the share whose extracted answer is the gold as written, another "
            "form of its value (0.5 for 1/2), an expression, or text copied from the question. A method is "
            f"flagged where at least {MIN_REWARDED} samples were rewarded and under {FLAG_BELOW:.0%} of them are "
            "the gold as written: its score may measure a hole in the grader, not the skill (read its "
            "samples.jsonl).\n\n"
            + markdown(["method", "set", "rewarded", "gold", "other form", "expression", "copied", ""], rows))


def flag_note(table: dict[str, dict[str, dict]]) -> str | None:
    """Said in the summary, before any score is read."""
    found = flagged(table)
    if not found:
        return None
    named = ", ".join(f"{m} on {b} ({table[m][b]['gold']:.0%} of {table[m][b]['rewarded']} rewarded answers are "
                      "the gold)" for m, b in found)
    return (f"**Possible reward hack**: {named}. These scores may measure a hole in the grader rather than the "
            "skill; the reward-hack audit below says what the rewarded answers are.")
