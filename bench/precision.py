"""Precision on evidence: the default's grpo trained in bf16 and in fp32, with
several seeds each, evaluated alike (fp32) on the held-out arithmetic.

    python bench/precision.py [--seeds 0 1] [--steps 10] [--bf16-steps 10 20] [--method grpo]

Each (precision, seed) trains in a process of its own with the default's
params (only model.dtype / train.bf16 and the seed differ), then every trained
model is evaluated in fp32, so only the training precision differs between
rows. Writes reports/precision.json and reports/precision.md: held-out avg@k
with 95% intervals, the paired difference bf16 - fp32 (seed-averaged problems),
the seed spread, and the time per training step. On a CPU without bf16 units
bf16 is emulated and slow, but its effect on learning is what is measured.
`--bf16-steps` adds bf16 arms of other lengths, e.g. one of the same wall
time as fp32 where bf16 steps are faster.
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
    from rlvr.evaluation.evaluator import run_evaluation
    from rlvr.settings.load import load_params
    from rlvr.settings.methods import method_config
    from rlvr.training.trainer import Trainer

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


def arm_label(run: dict) -> str:
    return f"{run['precision']}, {run['steps']} steps"


def summarize(runs: list[dict]) -> dict:
    """Each arm (precision, steps) over its seeds, and each bf16 arm against fp32."""
    from rlvr import stats

    out = {"runs": [{k: v for k, v in r.items() if k != "problems"} for r in runs], "arms": {}, "vs_fp32": {}}
    per = {}
    for label in dict.fromkeys(arm_label(r) for r in runs):
        mine = [r for r in runs if arm_label(r) == label]
        per[label] = np.mean([np.asarray(r["problems"]) for r in mine], axis=0)  # seed-averaged problems
        means = [float(np.mean(r["problems"])) for r in mine]
        out["arms"][label] = {"avg": stats.mean_ci([per[label]]), "seed_means": means,
                              "seed_sd": float(np.std(means, ddof=1)) if len(means) > 1 else None,
                              "steps": mine[0]["steps"], "mean_step_s": float(np.mean([r["mean_step_s"] for r in mine]))}
    fp32 = next(label for label in per if label.startswith("fp32"))
    for label in (label for label in per if label != fp32):
        diff = stats.paired_diff_ci([per[label]], [per[fp32]])
        seeds = stats.welch_diff_ci(out["arms"][label]["seed_means"], out["arms"][fp32]["seed_means"])
        out["vs_fp32"][label] = {"diff": diff, "verdict": _words(diff), "over_seeds": seeds,
                                 "verdict_over_seeds": None if np.isnan(seeds[1]) else _words(seeds)}
    return out


def _words(cell) -> str:
    from rlvr import stats

    return stats.verdict(cell[1], cell[2], "bf16 better", "bf16 worse")


def render(s: dict) -> str:
    lines = ["# Precision: the default's training in bf16 and in fp32", "",
             f"Machine: {s['machine']}. Method {s['method']}; base model stored in {s['base_dtype']}; every model "
             "evaluated in fp32 on the held-out arithmetic.", "",
             "| precision | steps | held-out avg@k [95% interval] | per seed | sd between seeds | step (s) | training (s) |",
             "|---|---|---|---|---|---|---|"]
    for label, a in s["arms"].items():
        e, lo, hi = a["avg"]
        sd = "-" if a["seed_sd"] is None else f"{a['seed_sd']:.3f}"
        lines.append(f"| {label.split(',')[0]} | {a['steps']} | {e:.3f} [{lo:.3f}, {hi:.3f}] | "
                     f"{', '.join(f'{m:.3f}' for m in a['seed_means'])} | {sd} | {a['mean_step_s']:.1f} | "
                     f"{a['steps'] * a['mean_step_s']:.0f} |")
    lines.append("")
    for label, v in s["vs_fp32"].items():
        d, lo, hi = v["diff"]
        line = (f"- {label} - fp32: over problems (paired, seed-averaged) {d:+.3f} [{lo:+.3f}, {hi:+.3f}]: "
                f"{v['verdict']}")
        if v.get("verdict_over_seeds"):
            d, lo, hi = v["over_seeds"]
            line += f"; over seeds (Welch t on the seed means) {d:+.3f} [{lo:+.3f}, {hi:+.3f}]: {v['verdict_over_seeds']}"
        lines.append(line + ".")
    return "\n".join(lines + [""])


def base_dtype(model_dir: str = "models/base") -> str:
    config = json.loads(Path(model_dir, "config.json").read_text())
    return str(config.get("dtype") or config.get("torch_dtype"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, default=10, help="fp32's training steps")
    ap.add_argument("--bf16-steps", type=int, nargs="+", help="bf16's training steps, one arm each (default: --steps)")
    ap.add_argument("--method", default="grpo")
    ap.add_argument("--out", default="reports")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        precision, work = args.child
        Path(work, "result.json").write_text(json.dumps(train_and_eval(precision, args.seeds[0], args.steps,
                                                                       args.method, Path(work))))
        return
    arms = [("fp32", args.steps)] + [("bf16", n) for n in (args.bf16_steps or [args.steps])]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for precision, steps in arms:
            for seed in args.seeds:
                work = Path(tmp) / f"{precision}-{steps}-{seed}"
                work.mkdir()
                subprocess.run([sys.executable, __file__, "--child", precision, str(work), "--seeds", str(seed),
                                "--steps", str(steps), "--method", args.method], check=True)
                runs.append(json.loads((work / "result.json").read_text()))
                print(f"[precision] {precision} {steps} steps, seed {seed}: avg {runs[-1]['avg']:.3f}, "
                      f"step {runs[-1]['mean_step_s']:.1f} s", flush=True)
    from rlvr.settings.hardware import cpu_flags, has_fast_bf16

    s = summarize(runs)
    s["machine"] = (f"{'bf16 units' if has_fast_bf16() else 'AVX2-only (no bf16 units)'}; flags "
                    f"{', '.join(sorted(cpu_flags() & {'avx2', 'avx512f', 'avx512_bf16', 'amx_bf16'}))}")
    s["method"], s["base_dtype"] = args.method, base_dtype()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "precision.json").write_text(json.dumps(s, indent=2))
    (out / "precision.md").write_text(render(s))
    print(render(s))


if __name__ == "__main__":
    main()
