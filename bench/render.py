"""bench.json -> reports/bench.md: every ratio from numbers measured in one run."""

from __future__ import annotations

TARGETS = {
    "rollout_speedup": 6.0,  # project engine tokens/s over transformers generate
    "step_speedup": 2.0,  # TRL step time over the project's, same work
    "repro_full_s": 30 * 60,
    "repro_noop_s": 10.0,
}


def hf_parts(parts: dict) -> list[dict]:
    return [p for k, p in sorted(parts.items()) if k.startswith("rollout_hf")]


def fastest_hf(parts: dict) -> dict | None:
    """The transformers baseline: its faster precision on this machine."""
    return max(hf_parts(parts), key=lambda p: p["tokens_per_s"], default=None)


def ratios(r: dict) -> dict:
    """The headline ratios; a ratio whose inputs were not measured is absent."""
    out = {}
    parts = r.get("parts", {})
    v, hf = parts.get("rollout_vllm"), fastest_hf(parts)
    if v and hf:
        out["rollout_speedup"] = v["tokens_per_s"] / hf["tokens_per_s"]
    trl = parts.get("step_trl_grpo")
    for method in ("grpo", "disco_logl"):
        ours = parts.get(f"step_rlvr_{method}")
        if ours and trl:
            out[f"step_speedup_{method}"] = trl["mean_step_s"] / ours["mean_step_s"]
    return out


def rollout_budget(r: dict) -> dict | None:
    """What the profiled vLLM batch says about the rollout target.

    ceiling_speedup: tokens/s if everything but the matmuls took no time,
    over the transformers baseline. other_budget_ms: what all the non-matmul
    work may cost per decode step for the target to hold; other_ms: what it
    costs now.
    """
    prof, hf = r.get("parts", {}).get("rollout_vllm_profile"), fastest_hf(r.get("parts", {}))
    if not (prof and hf):
        return None
    kinds, steps = prof["seconds_by_kind"], prof["decode_steps"]
    matmul = kinds["matmul"]
    target_s = prof["tokens"] / (TARGETS["rollout_speedup"] * hf["tokens_per_s"])
    return {"ceiling_speedup": prof["tokens"] / matmul / hf["tokens_per_s"],
            "matmul_ms": 1e3 * matmul / steps,
            "other_ms": 1e3 * (sum(kinds.values()) - matmul) / steps,
            "other_budget_ms": 1e3 * (target_s - matmul) / steps}


def verdicts(r: dict) -> list[tuple[str, str, str, bool]]:
    """(target, required, measured, met) for every target that was measured."""
    rows = []
    q = ratios(r)
    if "rollout_speedup" in q:
        best = fastest_hf(r["parts"])["dtype"]
        rows.append((f"rollout tokens/s vs transformers generate ({best})", f">= {TARGETS['rollout_speedup']:.0f}x",
                     f"{q['rollout_speedup']:.2f}x", q["rollout_speedup"] >= TARGETS["rollout_speedup"]))
    for method in ("grpo", "disco_logl"):
        key = f"step_speedup_{method}"
        if key in q:
            rows.append((f"RL step ({method}) vs TRL GRPOTrainer", f">= {TARGETS['step_speedup']:.0f}x",
                         f"{q[key]:.2f}x", q[key] >= TARGETS["step_speedup"]))
    repro = r.get("parts", {}).get("repro", {})
    for key, label in (("repro_full_s", "default `dvc repro` from scratch"), ("repro_noop_s", "`dvc repro`, nothing changed")):
        if key in repro:
            rows.append((label, f"< {_dur(TARGETS[key])}", _dur(repro[key]), repro[key] < TARGETS[key]))
    return rows


def _dur(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{int(s // 60)} min {int(s % 60)} s"


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def _rollout_profile(r: dict) -> list[str]:
    prof = r.get("parts", {}).get("rollout_vllm_profile")
    if not prof:
        return []
    kinds, steps = prof["seconds_by_kind"], prof["decode_steps"]
    wall = sum(kinds.values())
    out = [f"Where vLLM's rollout time goes: one batch ({prof['tokens']} tokens, {steps} decode steps, "
           f"{prof['seconds']:.1f} s) under torch's profiler, which adds its own overhead.", ""]
    out += _table(["kind", "seconds", "ms per decode step", "share"],
                  [[k, f"{s:.2f}", f"{1e3 * s / steps:.1f}", f"{100 * s / wall:.0f}%"] for k, s in kinds.items()])
    b = rollout_budget(r)
    if b:
        need = (f"all the rest would have to fit in {b['other_budget_ms']:.1f} ms per decode step; it takes "
                f"{b['other_ms']:.1f} ms" if b["other_budget_ms"] > 0 else "the matmuls alone take too long")
        out += ["", f"The matmuls alone ({b['matmul_ms']:.1f} ms per decode step) cap the engine at "
                f"{b['ceiling_speedup']:.1f}x transformers generate. For {TARGETS['rollout_speedup']:.0f}x, {need}."]
    return out + [""]


def render(r: dict) -> str:
    parts, work = r.get("parts", {}), r.get("work", {})
    out = ["# Benchmark: rollout and RL step, measured side by side in one run", "",
           f"Reproduce: `{r.get('command', 'python bench/run.py')}`", "",
           f"Machine: {r.get('machine', '?')}; CPU flags: {', '.join(r.get('cpu_flags', [])) or '?'} "
           f"({'bf16 units' if r.get('bf16_units') else 'no bf16 units'}). Versions: {r.get('versions', {})}.", "",
           f"Work (params.yaml's default step): B={work.get('questions')} questions x n={work.get('n')} "
           f"responses, max {work.get('max_tokens')} response tokens, temperature {work.get('temperature')}, "
           f"model `{work.get('model')}` in {work.get('model_dtype')}.", ""]
    rows = verdicts(r)
    if rows:
        out += ["## Targets", ""]
        out += _table(["target", "required", "measured", "met"], [[a, b, c, "yes" if ok else "**no**"] for a, b, c, ok in rows])
        out.append("")
    rollout = ([parts["rollout_vllm"]] if "rollout_vllm" in parts else []) + hf_parts(parts)
    if rollout:
        out += ["## Rollout: generated tokens/s", ""]
        out += _table(["engine", "dtype", "tokens", "seconds", "tokens/s", "peak RSS (MiB)"],
                      [[p["engine"], p["dtype"], p["tokens"], f"{p['seconds']:.1f}", f"{p['tokens_per_s']:.1f}",
                        f"{p.get('peak_rss_mib', 0):.0f}"] for p in rollout])
        out.append("")
    out += _rollout_profile(r)
    stages = parts.get("repro", {}).get("stages_s")
    if stages:
        out += ["## `dvc repro` from scratch: time per stage", "",
                f"In {parts['repro'].get('where', 'a fresh checkout')}.", ""]
        out += _table(["stage", "seconds"], [[k, f"{v:.1f}"] for k, v in stages.items()])
        out += [f"Sum of stages {sum(stages.values()):.0f} s of {parts['repro']['repro_full_s']:.0f} s in all "
                "(the rest: DVC's own hashing and caching, Python start-up).", ""]
    ranks = parts.get("step_ranks")
    if ranks:
        out += ["## The default step on 1 rank and on 2 ranks (1 core each)", ""]
        out += _table(["ranks", "mean step (s)", "phases (s)"],
                      [[p["ranks"], f"{p['mean_step_s']:.1f}", ", ".join(f"{k} {v:.1f}" for k, v in p["phases_s"].items())]
                       for p in ranks["runs"]])
        out += [f"2 ranks / 1 rank: {ranks['ratio']:.2f}x the step time. Each rank has a core of its own, so 0.50x "
                "would be perfect scaling; the rest is what the collectives, the split batch and a second engine "
                "cost.", ""]
    steps = [parts[k] for k in ("step_rlvr_grpo", "step_rlvr_disco_logl", "step_trl_grpo") if k in parts]
    if steps:
        out += ["## RL step wall time (rollout + reward + update + weight push)", "",
                "Mean over steps 2.. (step 1 pays first-call warm-up); every step's time is listed.", ""]
        out += _table(["framework", "method", "mean step (s)", "steps (s)", "mean response tokens", "train tokens/s",
                       "peak RSS (MiB)"],
                      [[p["framework"], p["method"], f"{p['mean_step_s']:.1f}",
                        ", ".join(f"{s:.1f}" for s in p["step_seconds"]), f"{p['response_length']:.0f}",
                        f"{p['train_tokens_per_s']:.0f}" if "train_tokens_per_s" in p else "-",
                        f"{p.get('peak_rss_mib', 0):.0f}"] for p in steps])
        out.append("")
        phased = [p for p in steps if "phases_s" in p]
        if phased:
            names = list(phased[0]["phases_s"])
            out += ["Where the project's step time goes (seconds):", ""]
            out += _table(["method", *names], [[p["method"], *(f"{p['phases_s'][n]:.2f}" for n in names)] for p in phased])
            out.append("")
    scaling = parts.get("scaling")
    if scaling:
        out += ["## Scaling: step time vs n and max response length (grpo)", ""]
        out += _table(["n", "max tokens", "mean step (s)", "rollout (s)", "update (s)", "mean response tokens",
                       "train tokens/s"],
                      [[c["n"], c["max_tokens"], f"{c['mean_step_s']:.1f}", f"{c['phases_s']['rollout']:.1f}",
                        f"{c['phases_s']['update']:.1f}", f"{c['response_length']:.0f}",
                        f"{c['train_tokens_per_s']:.0f}"] for c in scaling["configs"]])
        out.append("")
    failed = r.get("failed", {})
    if failed:
        out += ["## Parts that failed", ""] + [f"- `{k}`: {v}" for k, v in failed.items()] + [""]
    return "\n".join(out)
