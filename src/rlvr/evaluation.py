"""Evaluate a checkpoint: k samples per problem, graded, summarized per set and level."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

from rlvr.config import Params
from rlvr.data.prompts import build_prompt
from rlvr.data.records import Record, read_records, write_jsonl
from rlvr.metrics import mean_over, summarize
from rlvr.rewards import GroupGrade, Verifier


def eval_sets(params: Params) -> dict[str, list[Record]]:
    """The held-out arithmetic split and each configured benchmark, sliced by
    eval.limits (the first N problems, so every run sees the same slice)."""
    root = Path(params.data.out_dir)
    files = {"arithmetic": root / "arithmetic_test.jsonl"}
    files.update({b: root / "benchmarks" / f"{b}.jsonl" for b in params.data.benchmarks})
    sets = {}
    for name, path in files.items():
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: run the data stage first (dvc repro prepare_data)")
        limit = params.eval.limits.get(name)
        sets[name] = read_records(path)[:limit] if limit else read_records(path)
    return sets


def grade_sets(sets: dict[str, list[Record]], completions: dict[str, list[list]], verifier: Verifier
               ) -> dict[str, list[GroupGrade]]:
    return {
        name: verifier.grade([(r.golds, [c.text for c in comps]) for r, comps in zip(recs, completions[name])],
                             desc=f"verify {name}")
        for name, recs in sets.items()
    }


def set_metrics(records: list[Record], grades: list[GroupGrade]) -> dict:
    """Metrics of one set, plus the same per difficulty level where levels exist."""
    correct = [[it.correct for it in g.items] for g in grades]
    majority = [g.majority_correct for g in grades]
    out = summarize(correct, majority)
    by_level = defaultdict(list)
    for i, r in enumerate(records):
        if r.level is not None:
            by_level[r.level].append(i)
    if by_level:
        out["levels"] = {
            str(lv): summarize([correct[i] for i in idx], [majority[i] for i in idx])
            for lv, idx in sorted(by_level.items())
        }
    return out


def sample_rows(sets, completions, grades) -> list[dict]:
    rows = []
    for name, recs in sets.items():
        for r, comps, g in zip(recs, completions[name], grades[name]):
            for j, (c, it) in enumerate(zip(comps, g.items)):
                rows.append({"benchmark": name, "id": r.id, "level": r.level, "sample": j, "gold": r.answer,
                             "response": c.text, "extracted": it.extracted, "correct": it.correct,
                             "status": it.status, "truncated": c.truncated})
    return rows


def run_evaluation(model_path: str, params: Params, out_dir: str | Path, engine=None) -> dict:
    """Generate, grade and summarize; writes samples.jsonl and metrics.json to out_dir."""
    from rlvr.rollout import RolloutEngine

    out_dir = Path(out_dir)
    sets = eval_sets(params)
    engine = engine or RolloutEngine.from_params(model_path, params.engine, params.model.dtype)
    ev = params.eval
    names = list(sets)
    prompts = [build_prompt(r.problem, engine.tokenizer) for n in names for r in sets[n]]
    t0 = time.perf_counter()
    flat = engine.generate(prompts, n=ev.k, temperature=ev.temperature, top_p=ev.top_p, max_tokens=ev.max_new_tokens)
    gen_s = time.perf_counter() - t0
    completions, i = {}, 0
    for n in names:
        completions[n], i = flat[i : i + len(sets[n])], i + len(sets[n])
    t0 = time.perf_counter()
    with Verifier(params.verifier.workers, params.verifier.timeout_s, params.verifier.group_timeout_s) as verifier:
        grades = grade_sets(sets, completions, verifier)
        counts = verifier.counts
    verify_s = time.perf_counter() - t0
    per_set = {n: set_metrics(sets[n], grades[n]) for n in names}
    metrics = {
        "model": str(model_path),
        "k": ev.k,
        "mean": mean_over({n: {k: v for k, v in m.items() if k != "levels"} for n, m in per_set.items()}),
        "benchmarks": per_set,
        "generation": _generation_stats(flat, gen_s, engine.start_seconds),
        "verifier": {**counts.summary(), "seconds": round(verify_s, 2)},
    }
    rows = sample_rows(sets, completions, grades)
    write_jsonl(out_dir / "samples.jsonl", rows)
    _write_json(out_dir / "metrics.json", metrics)
    return {"metrics": metrics, "rows": rows}


def _generation_stats(flat, seconds: float, start_seconds: float) -> dict:
    comps = [c for group in flat for c in group]
    tokens = sum(len(c.token_ids) for c in comps)
    return {
        "samples": len(comps),
        "tokens": tokens,
        "tokens_per_s": round(tokens / max(seconds, 1e-9), 1),
        "mean_response_tokens": round(tokens / max(len(comps), 1), 1),
        "truncation_rate": round(sum(c.truncated for c in comps) / max(len(comps), 1), 4),
        "seconds": round(seconds, 2),
        "engine_start_seconds": round(start_seconds, 2),
    }


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def flat_metrics(metrics: dict) -> dict[str, float]:
    """metrics.json -> {'mean/avg@4': .., 'arithmetic/L1/avg@4': ..} for MLflow."""
    out = {f"mean/{k}": v for k, v in metrics["mean"].items()}
    for name, m in metrics["benchmarks"].items():
        for k, v in m.items():
            if k == "levels":
                for lv, lm in v.items():
                    out.update({f"{name}/L{lv}/{kk}": vv for kk, vv in lm.items()})
            else:
                out[f"{name}/{k}"] = v
    out.update({f"gen/{k}": v for k, v in metrics["generation"].items()})
    out.update({f"verifier/{k}": v for k, v in metrics["verifier"].items()})
    return out
