"""SIREN's training golds as stored against the same golds cleaned.

SIREN's reward parses the training parquet's `reward_model.ground_truth`
exactly as stored; the loader's split_answer would clean it first (`$`
removed, a trailing `.0` dropped, a list literal split). This counts, over
Openr1-Math-46k-8192's rows, the golds that cleaning changes and the rows
whose SIREN training reward (rlvr.grading.siren_official.siren_reward_group) differs
between the two forms for a response that boxes either form: the reason the
recipe keeps the gold as stored (its entry's gold: as_stored, rlvr.settings.datasets).

    python bench/gold_forms.py [--mirror data/vendor/hub | --online] [--out reports/gold_forms.md]

Offline it reads the vendored slice in the hub's format (data/vendor/hub);
`--online` loads the whole set from the hub.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compare(records) -> dict:
    """Counts of changed golds and of rows whose reward the cleaning flips, and a few examples."""
    from rlvr.data.sources import split_answer
    from rlvr.grading.siren_official import siren_reward_group

    changed, flipped, examples = 0, 0, []
    for r in records:
        stored = r.answer
        cleaned = split_answer(stored)[0]
        if cleaned == stored:
            continue
        changed += 1
        responses = [f"\\boxed{{{cleaned}}}", f"\\boxed{{{stored}}}"]
        as_stored = [g.correct for g in siren_reward_group([stored], responses, 5, None).items]
        as_cleaned = [g.correct for g in siren_reward_group([cleaned], responses, 5, None).items]
        if as_stored != as_cleaned:
            flipped += 1
            if len(examples) < 10:
                examples.append((stored, cleaned, as_stored, as_cleaned))
    return {"rows": len(records), "changed": changed, "flipped": flipped, "examples": examples}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", default=str(ROOT / "data/vendor/hub"))
    ap.add_argument("--online", action="store_true", help="the whole set from the hub (needs the network)")
    ap.add_argument("--out", default=None, help="also write the table here (markdown)")
    args = ap.parse_args()

    from rlvr.data.sources import load_hub

    records = load_hub("openr1_math", None if args.online else args.mirror)
    counts = compare(records)
    where = "the hub" if args.online else f"the mirror {Path(args.mirror).name}/"
    lines = [f"Openr1-Math-46k-8192 from {where}: {counts['rows']} rows; the gold changed by cleaning in "
             f"{counts['changed']}; SIREN's training reward differs between the two forms in {counts['flipped']} "
             "(responses boxing the cleaned and the stored form).", ""]
    lines += [f"- stored {s!r}, cleaned {c!r}: reward as stored {a}, cleaned {b}" for s, c, a, b in counts["examples"]]
    text = "\n".join(lines).rstrip() + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
