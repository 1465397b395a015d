"""Which prompt gives the base model an honest, measurable score on the arithmetic task?

Samples the base model (models/base, `dvc repro prepare_model`) on held-out
arithmetic problems under each candidate prompt and grades the responses with
the task's own rule (a numeric literal in the stated place): per level, the
share correct, the share that states a number at all, and the mean response
length. Writes reports/prompt_probe.md.

    python bench/prompt_probe.py [--per-level 40] [--k 4] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

if __name__ == "__main__":
    ROOT = Path(__file__).resolve().parents[1]

CANDIDATES = {
    "boxed_brief": "{problem}\nThink briefly, then give the final answer within \\boxed{}.",
    "number_only": "{problem}\nReply with the number only, as \"Answer: N\".",
    "equation": "{problem}\nWrite the equation with its result, as in 2 + 3 = 5.",
    "equation_only": "{problem}\nReply with one line: the expression, \"=\", and the number it equals.",
    "example_equation": "Example: Compute 2 + 3.\n2 + 3 = 5\n\nNow: {problem}\nReply as in the example.",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-level", type=int, default=40)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--levels", default="1,2,3,4,5")
    ap.add_argument("--out", default=str(ROOT / "reports" / "prompt_probe.md"))
    args = ap.parse_args()

    from rlvr.data.arithmetic import generate
    from rlvr.data.prompts import prompt_token_ids
    from rlvr.grading.grades import OK
    from rlvr.grading.pool import Verifier, grading_job
    from rlvr.rollout.vllm_engine import RolloutEngine
    from rlvr.settings.prompt import PromptParams

    levels = [int(x) for x in args.levels.split(",")]
    _, test = generate(levels, 0, args.per_level, seed=99)  # a seed of its own: the default's test split stays unseen
    engine = RolloutEngine(str(ROOT / "models" / "base"), dtype="float32", max_model_len=1024, enforce_eager=True,
                           seed=0)
    lines = [f"# Prompt probe: the base model on arithmetic ({args.per_level} problems a level, k = {args.k}, "
             f"{args.max_tokens} new tokens, temperature 0.7, graded as the task states)\n",
             "| prompt | " + " | ".join(f"L{lv}" for lv in levels) + " | all | states a number | tokens |",
             "|---" * (len(levels) + 4) + "|"]
    with Verifier(workers=2, grader="math_verify", half="train") as verifier:
        for name, user in CANDIDATES.items():
            prompt = PromptParams(user=user)
            ids = [prompt_token_ids(r.problem, engine.tokenizer, prompt) for r in test]
            outs = engine.generate(ids, n=args.k, temperature=0.7, top_p=1.0, max_tokens=args.max_tokens)
            grades = verifier.grade([grading_job(r, [c.text for c in cs]) for r, cs in zip(test, outs)])
            by_level, stated, lengths = defaultdict(list), [], []
            for r, g, cs in zip(test, grades, outs):
                by_level[r.level] += [it.correct for it in g.items]
                stated += [it.status == OK for it in g.items]
                lengths += [len(c.token_ids) for c in cs]
            allc = [c for v in by_level.values() for c in v]
            lines.append(f"| {name} | " + " | ".join(f"{statistics.mean(by_level[lv]):.3f}" for lv in levels)
                         + f" | {statistics.mean(allc):.3f} | {statistics.mean(stated):.3f} | "
                           f"{statistics.mean(lengths):.1f} |")
            print(lines[-1], flush=True)
            print("   e.g.", [cs[0].text for cs in outs[:3]], flush=True)
    lines.append("\nPrompts:\n")
    lines += [f"- {name}: `{user!r}`" for name, user in CANDIDATES.items()]
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
