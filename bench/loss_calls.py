"""Loss calls of whole groups against token-budget bins, on the CPU default's
work: the share of padding and the update's time, in one run on one machine.

    python bench/loss_calls.py                      # budgets 0 (whole groups), 96, 192, 384
    python bench/loss_calls.py --budgets 0 128 --repeats 5
    python bench/loss_calls.py --budgets 0 384 --padding-free 0 384   # also padding-free (train.padding_free)

The rollouts are real (the default's model and vLLM engine, `--steps` steps of
the default's questions) and fixed; each layout then makes the same update
from the same weights, `--repeats` times, layouts interleaved so that the
machine's drift hits them alike. Reports the median time of the pi_old pass
plus the loss calls, the padding share of the tokens the forward passes
processed, and the calls per step. Needs the prepared data and model
(`dvc repro prepare_data prepare_model`).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "models/base"


def cpu_flags() -> str:
    from rlvr.settings.hardware import cpu_flags as flags

    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
    have = flags()
    return ", ".join(f for f in wanted if f in have) or "none of " + ", ".join(wanted)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", type=int, nargs="+", default=[0, 96, 192, 384],
                    help="train.max_tokens_per_call values (0: micro_batch_questions whole groups per call)")
    ap.add_argument("--padding-free", type=int, nargs="*", default=[],
                    help="budgets also run with train.padding_free (every call one unpadded row)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3, help="rollout steps whose groups are trained on")
    ap.add_argument("--method", default="grpo")
    args = ap.parse_args()

    from rlvr.rollout.vllm_engine import RolloutEngine
    from rlvr.settings.load import load_params
    from rlvr.settings.methods import method_config
    from rlvr.training.step_metrics import PhaseTimer
    from rlvr.training.trainer import Trainer

    params = load_params(ROOT / "params.yaml")
    base = method_config(params, args.method)
    base = dataclasses.replace(base, train=dataclasses.replace(
        base.train, questions_per_step=base.train.questions_per_step * args.steps, checkpoint_every=10**6))
    engine = RolloutEngine.from_params(MODEL, params.engine, params.model.dtype)
    with tempfile.TemporaryDirectory() as tmp:
        probe = Trainer(params, base, MODEL, Path(tmp) / "probe", Path(tmp) / "final", rollout_engine=engine)
        probe.setup()
        groups = probe.collector.collect(PhaseTimer()).groups
        probe.verifier.close()
        longest = max(len(g.prompt_ids) + len(r) for g in groups for r in g.responses)
        layouts = [(b, False) for b in args.budgets] + [(b, True) for b in args.padding_free]
        rows = {lay: [] for lay in layouts}
        for _ in range(args.repeats):
            for budget, flat in layouts:
                if 0 < budget < longest:
                    continue
                mc = dataclasses.replace(base, train=dataclasses.replace(base.train, max_tokens_per_call=budget,
                                                                         padding_free=flat))
                tr = Trainer(params, mc, MODEL, Path(tmp) / f"b{budget}{flat}", Path(tmp) / "final", rollout_engine=engine)
                tr.setup()
                rows[budget, flat].append(tr.step(0, groups=copy.deepcopy(groups)))
                tr.verifier.close()
    out = {"machine": cpu_flags(), "method": args.method, "groups": len(groups),
           "responses": sum(len(g.responses) for g in groups), "longest_sequence": longest, "layouts": []}
    for (budget, flat), got in rows.items():
        if not got:
            continue
        times = [r["time_old_logprobs"] + r["time_update"] for r in got]
        out["layouts"].append({
            "max_tokens_per_call": budget, "padding_free": flat, "loss_calls": got[0]["loss_calls"],
            "pad_share": round(1 - got[0]["train_tokens"] / got[0]["train_padded_tokens"], 3),
            "update_s_median": round(statistics.median(times), 3), "update_s": [round(t, 3) for t in times],
            "loss": got[0]["loss"]})
    print(json.dumps(out, indent=1))
    print(f"\n{out['groups']} groups, {out['responses']} responses, longest sequence {longest} tokens; "
          f"CPU flags: {out['machine']}\n")
    print("| max_tokens_per_call | padding-free | loss calls | padding | pi_old + update, median s |")
    print("|---|---|---|---|---|")
    for lay in out["layouts"]:
        label = "0 (whole groups)" if lay["max_tokens_per_call"] == 0 else f"{lay['max_tokens_per_call']:,}"
        print(f"| {label} | {'yes' if lay['padding_free'] else 'no'} | {lay['loss_calls']:.0f} | "
              f"{lay['pad_share']:.1%} | {lay['update_s_median']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main())
