"""What vLLM's KV-cache block size costs an evaluation on this CPU.

Prefix caching reuses whole blocks only. The default prompt (the chat
template's system turn, then the problem) is ~54 tokens, under vLLM's CPU
block of 128, so every sample of every problem is prefilled from scratch; at
32 tokens a block, the shared system turn and a problem's k samples reuse
their cached prefix. Each block size runs in a fresh process on the same
work: the default evaluation's prompts (held-out arithmetic, k = 2, its
sampling settings), one warm-up batch first.

    python bench/engine_probe.py [--sizes 128,32] [--problems 300] [--models models/base,models/grpo/seed0]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(block_size: int, problems: int, model: str) -> dict:
    from rlvr.data.prompts import prompt_token_ids
    from rlvr.data.records import read_records
    from rlvr.rollout.vllm_engine import RolloutEngine
    from rlvr.settings.load import load_params

    params = load_params(ROOT / "params.yaml")
    records = read_records(params.data.eval_dir / "arithmetic.jsonl")[:problems]
    engine = RolloutEngine(str(ROOT / model), dtype=params.model.dtype,
                           max_model_len=params.engine.max_model_len, enforce_eager=True, seed=0,
                           kv_cache_gib=params.engine.kv_cache_gib, block_size=block_size)
    prompts = [prompt_token_ids(r.problem, engine.tokenizer, params.prompt, r.system) for r in records]
    e = params.eval
    engine.generate(prompts[:8], n=e.k, temperature=e.temperature, top_p=e.top_p, max_tokens=8, progress=False)
    t0 = time.perf_counter()
    outs = engine.generate(prompts, n=e.k, temperature=e.temperature, top_p=e.top_p, max_tokens=e.max_new_tokens,
                           progress=False)
    seconds = time.perf_counter() - t0
    return {"block_size": block_size, "problems": len(prompts), "k": e.k, "seconds": round(seconds, 1),
            "prompt_tokens": sum(map(len, prompts)), "generated": sum(len(c.token_ids) for cs in outs for c in cs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="128,32")
    ap.add_argument("--problems", type=int, default=300)
    ap.add_argument("--models", default="models/base,models/grpo/seed0", help="checkpoints, as evaluated")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process: one block size
    ap.add_argument("--out", default=str(ROOT / "reports" / "engine_probe.md"))
    args = ap.parse_args()
    if args.one:
        print("RESULT " + json.dumps(measure(args.one, args.problems, args.models)), flush=True)
        return
    lines = [f"# vLLM's KV-cache block size on the default evaluation ({args.problems} problems, its k and "
             "sampling settings)\n", "| model | block size | seconds | speed-up | prompt tokens | generated |",
             "|---|---|---|---|---|---|"]
    for model in args.models.split(","):
        rows = []
        for size in (int(s) for s in args.sizes.split(",")):
            done = subprocess.run([sys.executable, __file__, "--one", str(size), "--problems", str(args.problems),
                                   "--models", model], capture_output=True, text=True, cwd=ROOT)
            line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                raise SystemExit(f"block size {size} failed:\n{done.stderr[-3000:]}")
            rows.append(json.loads(line[len("RESULT "):]))
            print(model, rows[-1], flush=True)
        lines += [f"| {model} | {r['block_size']} | {r['seconds']} | {rows[0]['seconds'] / r['seconds']:.2f}x | "
                  f"{r['prompt_tokens']} | {r['generated']} |" for r in rows]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
