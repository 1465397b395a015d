"""Small fixed train/eval outputs for the report's tests: write_eval and
write_samples write a run's evaluation over the problems of BENCH (a test
may swap BENCH for its own sets), write_steps its training's step log."""

import csv
import json
from pathlib import Path

from rlvr.runs import Run

BENCH = {"arithmetic": ["a", "b"], "math500": ["c"]}


def write_eval(root: Path, run: Run, correct: dict[str, int], k: int = 2, majority=None, levels=None):
    """correct: problem id -> correct samples out of k; metrics.json is derived the same way."""
    d = root / run.eval_dir
    d.mkdir(parents=True)
    rows = [{"benchmark": b, "id": q, "level": (levels or {}).get(q), "k": k, "correct": correct[q],
             "majority": (majority or {}).get(q, correct[q] * 2 > k)} for b, qs in BENCH.items() for q in qs]
    (d / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    bench = {b: {f"avg@{k}": sum(correct[q] for q in qs) / (k * len(qs)), "n_problems": float(len(qs))}
             for b, qs in BENCH.items()}
    if levels:
        bench["arithmetic"]["levels"] = {str(levels[q]): {f"avg@{k}": correct[q] / k} for q in BENCH["arithmetic"]}
    (d / "metrics.json").write_text(json.dumps({"k": k, "mean": {}, "benchmarks": bench}))
    if run.trained and not (root / run.train_dir / "steps.csv").exists():
        write_steps(root, run, [0.1, 0.2])  # a trained run always has its step log (the report requires it)


def write_steps(root: Path, run: Run, rewards: list[float], entropy_slope: float = -0.1, extra=None):
    d = root / run.train_dir
    d.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(["step", "reward_mean", "entropy", "kl", "response_length", "topp_entropy",
                                 "zero_variance_groups", "all_correct_groups", "all_wrong_groups", "kl_active",
                                 "clip_frac", *(extra or {})]))
    with open(d / "steps.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for i, r in enumerate(rewards, start=1):
            w.writerow({"step": i, "reward_mean": r, "entropy": 1.0 + entropy_slope * i, "kl": 1e-4 * i,
                        "response_length": 50 + i, "topp_entropy": 0.5, "zero_variance_groups": 0.5,
                        "all_correct_groups": 0.05 * i, "all_wrong_groups": 0.5 - 0.05 * i, "kl_active": 0.5, "clip_frac": 0.1, **{k: v(i) for k, v in (extra or {}).items()}})


RUNS = [Run("base"), Run("grpo", 0), Run("disco_logl", 0)]


def write_samples(root: Path, run: Run, answers: dict[str, list[tuple[str, bool]]], problem=lambda q: f"Compute {q}."):
    """samples.jsonl beside a run's evaluation: per problem id, its (extracted answer, correct) samples."""
    d = root / run.eval_dir
    rows = [{"benchmark": b, "id": q, "sample": j, "problem": problem(q), "gold": "8", "response": text,
             "extracted": text, "correct": ok} for b, qs in BENCH.items() for q in qs
            for j, (text, ok) in enumerate(answers.get(q, []))]
    (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

