"""Precision on evidence: the default's grpo trained in bf16 and in fp32, with
several seeds each, evaluated alike (fp32) on the held-out arithmetic.

    python bench/precision.py [--seeds 0 1] [--steps 10] [--bf16-steps 20] [--method grpo]

Each (precision, seed) trains in a process of its own with the default's
params (only model.dtype / train.bf16 and the seed differ), then every trained
model is evaluated in fp32, so only the training precision differs between
rows. Writes reports/precision.json and reports/precision.md: held-out avg@k
with 95% intervals, the paired difference bf16 - fp32 (seed-averaged problems),
the seed spread, and the time per training step. On a CPU without bf16 units
bf16 is emulated and slow, but its effect on learning is what is measured.
`--bf16-steps` trains bf16 longer, e.g. for the same wall time as fp32 where
bf16 steps are faster.
Needs the prepared data and base model (`dvc repro prepare_data prepare_model`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def train_and_eval(precision: str, seed: int, steps: int, method: str, work: Path) -> dict:
    """Child process: train one run, evaluate it in fp32; returns the summary."""
    from rlvr.config import load_params, method_config
    from rlvr.evaluation import run_evaluation
    from rlvr.trainer import Trainer

    params = load_params()
    params.model.dtype = "bfloat16" if precision == "bf16" else "float32"
    mc = method_config(params, method)
    mc = dataclasses.replace(mc, train=dataclasses.replace(mc.train, steps=steps, seed=seed,
                                                           bf16=precision == "bf16", checkpoint_every=10**6))
    rows = Trainer(params, mc, "models/base", work / "run", work / "model", steps_file=work / "steps.csv").train()
    params.model.dtype = "float32"
    params.data.benchmarks = []  # held-out arithmetic only
    result = run_evaluation(work / "model", params, work / "eval")
    step_s = [r["time_total"] for r in rows[1:]] or [rows[0]["time_total"]]
    problems = [json.loads(line) for line in (work / "eval/problems.jsonl").read_text().splitlines()]
    return {"precision": precision, "seed": seed, "steps": steps, "mean_step_s": float(np.mean(step_s)),
            "avg": result["metrics"]["mean"][f"avg@{params.eval.k}"],
            "problems": [p["correct"] / p["k"] for p in problems]}


def summarize(runs: list[dict]) -> dict:
    from rlvr import stats

    out = {"runs": [{k: v for k, v in r.items() if k != "problems"} for r in runs]}
    per = {}
    for precision in ("fp32", "bf16"):
        mine = [np.asarray(r["problems"]) for r in runs if r["precision"] == precision]
        per[precision] = np.mean(mine, axis=0)
        means = [float(m.mean()) for m in mine]
        out[precision] = {"avg": stats.mean_ci([per[precision]]), "seed_means": means,
                          "seed_sd": float(np.std(means, ddof=1)) if len(means) > 1 else None,
                          "steps": next(r["steps"] for r in runs if r["precision"] == precision),
                          "mean_step_s": float(np.mean([r["mean_step_s"] for r in runs if r["precision"] == precision]))}
    diff = stats.paired_diff_ci([per["bf16"]], [per["fp32"]])
    out["bf16_minus_fp32"] = {"diff": diff, "verdict": stats.verdict(diff[1], diff[2], "bf16 better", "bf16 worse")}
    return out


def render(s: dict, machine: str) -> str:
    lines = ["# Precision: the default's training in bf16 and in fp32", "", f"Machine: {machine}.", "",
             "| precision | steps | held-out avg@k [95% interval] | per seed | sd between seeds | step (s) | training (s) |",
             "|---|---|---|---|---|---|---|"]
    for p in ("fp32", "bf16"):
        e, lo, hi = s[p]["avg"]
        sd = s[p]["seed_sd"]
        steps, step_s = s[p]["steps"], s[p]["mean_step_s"]
        lines.append(f"| {p} | {steps} | {e:.3f} [{lo:.3f}, {hi:.3f}] | {', '.join(f'{m:.3f}' for m in s[p]['seed_means'])} | "
                     f"{'-' if sd is None else f'{sd:.3f}'} | {step_s:.1f} | {steps * step_s:.0f} |")
    d, lo, hi = s["bf16_minus_fp32"]["diff"]
    lines += ["", f"bf16 - fp32 (paired over problems, seed-averaged): {d:+.3f} [{lo:+.3f}, {hi:+.3f}]: "
              f"{s['bf16_minus_fp32']['verdict']}.", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--bf16-steps", type=int, help="bf16's training steps (default: --steps)")
    ap.add_argument("--method", default="grpo")
    ap.add_argument("--out", default="reports")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        precision, work = args.child
        Path(work, "result.json").write_text(json.dumps(train_and_eval(precision, args.seeds[0], args.steps,
                                                                       args.method, Path(work))))
        return
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for precision in ("fp32", "bf16"):
            for seed in args.seeds:
                work = Path(tmp) / f"{precision}-{seed}"
                work.mkdir()
                steps = args.bf16_steps if precision == "bf16" and args.bf16_steps else args.steps
                subprocess.run([sys.executable, __file__, "--child", precision, str(work), "--seeds", str(seed),
                                "--steps", str(steps), "--method", args.method], check=True)
                runs.append(json.loads((work / "result.json").read_text()))
                print(f"[precision] {precision} seed {seed}: avg {runs[-1]['avg']:.3f}, "
                      f"step {runs[-1]['mean_step_s']:.1f} s", flush=True)
    from rlvr.hardware import cpu_flags, has_fast_bf16

    machine = f"{'bf16 units' if has_fast_bf16() else 'AVX2-only (no bf16 units)'}; flags " \
              f"{', '.join(sorted(cpu_flags() & {'avx2', 'avx512f', 'avx512_bf16', 'amx_bf16'}))}"
    s = summarize(runs)
    s["machine"], s["method"] = machine, args.method
    out = Path(args.out)
    (out / "precision.json").write_text(json.dumps(s, indent=2))
    (out / "precision.md").write_text(render(s, machine))
    print(render(s, machine))


if __name__ == "__main__":
    main()
