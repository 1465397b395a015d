"""How much of a training step carries signal? The base model on the training pool.

Samples the base model (models/base) on questions of the training pool
(data/prepared/train, `dvc repro prepare_data prepare_model`), k responses
each at the training temperature, once at the longest response budget:
a response cut at a shorter budget is the same sample's first tokens (sampling
is token by token), so one generation measures every budget. Per level and
budget: the share solved, the share cut at the budget, the mean length, and
the share of groups whose rewards differ (informative: the only groups a
group-relative objective learns from) for groups of n responses, computed
exactly from each question's k samples (the chance that n of them drawn
without replacement are not all alike).

It also measures a pool filter: questions kept when the first `--filter-k` of
their samples hold a right answer, and the informative share of groups drawn
from their other samples, so the estimate is not scored on the samples that
chose it.

    python bench/signal_probe.py [--per-level 60] [--k 8] [--budgets 32,48,64,96]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections import defaultdict
from math import comb
from pathlib import Path

if __name__ == "__main__":
    ROOT = Path(__file__).resolve().parents[1]


def uniform_chance(correct: int, k: int, n: int) -> float:
    """P(n of a question's k samples, drawn without replacement, are all right or all wrong)."""
    return (comb(correct, n) + comb(k - correct, n)) / comb(k, n)


def cut(ids: list[int], truncated: bool, budget: int) -> tuple[list[int], bool]:
    """The response a budget of `budget` new tokens would have given."""
    return (ids[:budget], True) if len(ids) > budget else (ids, truncated and len(ids) == budget)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-level", type=int, default=60)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--groups", default="4,8", help="group sizes n to score")
    ap.add_argument("--budgets", default="32,48,64,96")
    ap.add_argument("--filter-k", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--out", default=str(ROOT / "reports" / "signal_probe.md"))
    args = ap.parse_args()

    from rlvr.data.prompts import prompt_token_ids
    from rlvr.data.records import read_records
    from rlvr.grading.pool import Verifier, grading_job
    from rlvr.rollout.vllm_engine import RolloutEngine
    from rlvr.settings.load import load_params

    params = load_params(ROOT / "params.yaml")
    budgets, sizes = [int(b) for b in args.budgets.split(",")], [int(n) for n in args.groups.split(",")]
    by_level = defaultdict(list)
    for r in read_records(params.data.train_dir / "train.jsonl"):
        by_level[r.level].append(r)
    rng = random.Random(0)
    records = [r for lv in sorted(by_level) for r in rng.sample(by_level[lv], min(args.per_level, len(by_level[lv])))]
    engine = RolloutEngine(str(ROOT / "models" / "base"), dtype=params.model.dtype, max_model_len=1024,
                           enforce_eager=True, seed=0)
    prompt = params.prompt.for_training()
    ids = [prompt_token_ids(r.problem, engine.tokenizer, prompt, r.system) for r in records]
    outs = engine.generate(ids, n=args.k, temperature=args.temperature, top_p=1.0, max_tokens=max(budgets))
    rows = {}
    with Verifier(workers=2, grader=params.verifier.grader, half="train") as verifier:
        for b in budgets:
            cuts = [[cut(c.token_ids, c.truncated, b) for c in cs] for cs in outs]
            texts = [[engine.tokenizer.decode(t, skip_special_tokens=True) for t, _ in cs] for cs in cuts]
            grades = verifier.grade([grading_job(r, t) for r, t in zip(records, texts)])
            for r, cs, g in zip(records, cuts, grades):
                right = [it.correct for it in g.items]
                rows.setdefault((r.level, b), []).append({"right": right, "cut": [t for _, t in cs],
                                                          "len": [len(t) for t, _ in cs]})
    table = summarize(rows, budgets, sizes, args.k, args.filter_k)
    lines = [f"# Signal probe: the base model on the training pool ({args.per_level} questions a level, "
             f"k = {args.k} responses at temperature {args.temperature}, prompt as params.yaml)\n",
             "| level | budget | solved | cut at the budget | tokens | "
             + " | ".join(f"informative, n = {n}" for n in sizes)
             + f" | kept by a {args.filter_k}-sample filter | informative after it, n = {min(sizes)} |",
             "|---" * (7 + len(sizes)) + "|"]
    for row in table:
        lines.append("| " + " | ".join(str(row[c]) for c in row) + " |")
    lines += ["", "A question is informative for a group of n when its n responses' rewards differ; the share is "
              "the exact chance over each question's k samples. The filter keeps a question when one of its first "
              f"{args.filter_k} samples is right; the share after it is over its remaining samples."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(table, indent=1) + "\n")
    print("\n".join(lines))


def summarize(rows: dict, budgets: list[int], sizes: list[int], k: int, filter_k: int) -> list[dict]:
    out = []
    for level in sorted({lv for lv, _ in rows} | {0}):
        for b in budgets:
            qs = [q for (lv, bb), v in rows.items() if bb == b and (level == 0 or lv == level) for q in v]
            rest = k - filter_k
            kept = [q for q in qs if any(q["right"][:filter_k])]
            row = {"level": level or "all", "budget": b,
                   "solved": round(statistics.mean(c for q in qs for c in q["right"]), 3),
                   "cut": round(statistics.mean(c for q in qs for c in q["cut"]), 3),
                   "tokens": round(statistics.mean(x for q in qs for x in q["len"]), 1)}
            for n in sizes:
                row[f"informative_n{n}"] = round(1 - statistics.mean(uniform_chance(sum(q["right"]), k, n)
                                                                     for q in qs), 3)
            n = min(sizes)
            row["filter_kept"] = round(len(kept) / len(qs), 3)
            row["informative_after_filter"] = round(1 - statistics.mean(
                uniform_chance(sum(q["right"][filter_k:]), rest, min(n, rest)) for q in kept), 3) if kept else 0.0
            out.append(row)
    return out


if __name__ == "__main__":
    main()
