"""Rollout throughput: the project's vLLM engine vs transformers `generate`.

Same model, same prompts, same n, same max length, sampling at the same
temperature, measured in one run. Writes reports/bench_rollout.json and prints
a table. Usage: python bench/rollout.py [--prompts 12 --n 8 --max-tokens 128]
"""

import argparse
import json
import time
from pathlib import Path

import torch

from rlvr.data.arithmetic import generate
from rlvr.data.prompts import build_prompt


def hf_generate(model_path, prompts, n, max_tokens, temperature):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.bfloat16).eval()
    batch = tok([p for p in prompts for _ in range(n)], return_tensors="pt", padding=True)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(**batch, do_sample=True, temperature=temperature, max_new_tokens=max_tokens,
                             pad_token_id=tok.pad_token_id)
    seconds = time.perf_counter() - t0
    new = out[:, batch["input_ids"].shape[1]:]
    tokens = int(sum((row != tok.pad_token_id).sum() for row in new))
    return tokens, seconds


def vllm_generate(model_path, prompts, n, max_tokens, temperature):
    from rlvr.rollout import RolloutEngine

    engine = RolloutEngine(model_path, kv_cache_gib=2)
    engine.generate(prompts[:1], n=1, temperature=temperature, top_p=1.0, max_tokens=8, progress=False)  # warm-up
    t0 = time.perf_counter()
    outs = engine.generate(prompts, n=n, temperature=temperature, top_p=1.0, max_tokens=max_tokens, progress=False)
    seconds = time.perf_counter() - t0
    return sum(len(c.token_ids) for o in outs for c in o), seconds, engine.tokenizer


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="models/base")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.7)
    args = ap.parse_args()
    train, _ = generate([1, 2, 3], args.prompts, 1, seed=0)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model)
    prompts = [build_prompt(r.problem, tok) for r in train]
    v_tokens, v_s, _ = vllm_generate(args.model, prompts, args.n, args.max_tokens, args.temperature)
    h_tokens, h_s = hf_generate(args.model, prompts, args.n, args.max_tokens, args.temperature)
    result = {
        "work": {"prompts": len(prompts), "n": args.n, "max_tokens": args.max_tokens, "model": args.model},
        "vllm": {"tokens": v_tokens, "seconds": round(v_s, 2), "tokens_per_s": round(v_tokens / v_s, 1)},
        "transformers_generate": {"tokens": h_tokens, "seconds": round(h_s, 2), "tokens_per_s": round(h_tokens / h_s, 1)},
    }
    result["speedup"] = round(result["vllm"]["tokens_per_s"] / result["transformers_generate"]["tokens_per_s"], 2)
    Path("reports").mkdir(exist_ok=True)
    Path("reports/bench_rollout.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
