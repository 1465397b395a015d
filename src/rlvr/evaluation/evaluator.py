"""Evaluate a checkpoint: k samples per problem, graded, summarized per set and level.

Under the DeepSpeed launcher every rank generates and grades its share of the
problems with its own vLLM engine; rank 0 merges them into the same outputs a
single process writes. A trained run's best-on-validation snapshot
(train.eval_every) is scored in the same engine, its weights pushed in; one
already scored under the same evaluation settings is skipped. The trainer
validates through the same Evaluator, on the held-out problems with the
light profile (validation:).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

from rlvr import distributed
from rlvr.atomic import write_json
from rlvr.data.prompts import prompt_token_ids
from rlvr.data.records import Record, read_records, write_jsonl
from rlvr.evaluation.metrics import mean_over, validation_columns
from rlvr.evaluation.problems import data_sets, eval_sets, problem_rows, sample_rows, set_metrics, skipped_rows
from rlvr.grading.pool import Verifier, grading_job
from rlvr.run_files import SNAPSHOTS  # written by the trainer beside the final model
from rlvr.schema import ConfigError, settings_hash, unknown_name
from rlvr.settings.prompt import PromptParams
from rlvr.settings.sections import EvalParams, Params, ValidationParams

BY_STEP = "by_step.json"  # per-snapshot metrics, kept across reruns of the stage


class Evaluator:
    """One vLLM engine and one verifier pool per rank, for any number of
    checkpoints. `sets`, `profile` and `prompt` default to the test sets, eval:
    and the evaluation prompt; the trainer passes the held-out validation set,
    validation:, the training prompt (official validation sets go through the
    training data's pipeline) and its own engine."""

    def __init__(self, params: Params, model_path: str, rollout_engine=None,
                 sets: dict[str, list[Record]] | None = None,
                 profile: EvalParams | ValidationParams | None = None, prompt: PromptParams | None = None,
                 grading: str = "eval"):
        """`grading`: the grader's half, eval or train (validation during training grades as the rewards do)."""
        from rlvr.rollout.vllm_engine import RolloutEngine

        self.params, self.ranks, self.grading = params, distributed.ranks_from_env(), grading
        self.sets = eval_sets(params) if sets is None else sets
        self.profile = params.eval if profile is None else profile
        self.prompt = params.prompt if prompt is None else prompt
        self.problems = [(name, r) for name, recs in self.sets.items() for r in recs]
        # Alone on its GPU: the evaluation engine takes eval.gpu_memory_utilization, not training's share.
        self.rollout_engine = rollout_engine or RolloutEngine.from_params(
            model_path, params.engine, params.model.dtype, seed=params.engine.seed + self.ranks.rank,
            gpu_memory_utilization=params.eval.gpu_memory_utilization, max_model_len=params.eval.max_model_len)
        self.tokenizer = self.rollout_engine.tokenizer

    @classmethod
    def validation(cls, params: Params, model_path: str, rollout_engine, prompt: PromptParams) -> "Evaluator":
        """The trainer's validation: the problems held out of the training mixture
        with the validation profile, the training prompt and the training
        reward's grading (verl validates with the reward function), in its own engine."""
        held_out = read_records(params.data.validation_file)
        return cls(params, model_path, rollout_engine, sets={"validation": held_out}, profile=params.validation,
                   prompt=prompt, grading="train")

    def validation_columns(self, label: str) -> dict[str, float]:
        """The loaded weights validated: steps.csv's val_* columns and the time it took. Collective."""
        t0 = time.perf_counter()
        metrics, _, problems = self.evaluate(label)
        return {**validation_columns(metrics, problems), "time_validation": time.perf_counter() - t0}

    def context_len(self) -> int:
        """The evaluation engine's context: a response with no cap of its own
        (eval.max_new_tokens null) stops where it ends (vLLM's length cap)."""
        return self.params.eval.max_model_len or self.params.engine.max_model_len

    def settings_id(self) -> str:
        """What evaluation results depend on besides the weights."""
        p = self.params
        return settings_hash(dataclasses.asdict(self.profile), dataclasses.asdict(self.prompt), p.verifier.grader,
                             [b if isinstance(b, str) else dataclasses.asdict(b) for b in p.data.benchmarks],
                             [(n, r.id) for n, r in self.problems])

    def evaluate(self, label: str) -> tuple[dict, list[dict], list[dict]]:
        """Metrics, per-sample and per-problem rows of the loaded weights (on rank 0; empty elsewhere)."""
        ev = self.profile
        mine = self.problems[self.ranks.rank :: self.ranks.world]  # strided: every rank gets every set
        prompts = [prompt_token_ids(r.problem, self.tokenizer, self.prompt, r.system) for _, r in mine]
        counts = [ev.k_for(name) for name, _ in mine]
        t0 = time.perf_counter()
        completions = self.rollout_engine.generate(prompts, n=counts, temperature=ev.temperature, top_p=ev.top_p,
                                                   max_tokens=ev.max_new_tokens or self.context_len(),
                                                   progress=self.ranks.main,
                                                   logprobs=True)
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        with Verifier.from_params(self.params, half=self.grading) as verifier:
            grades = verifier.grade([grading_job(r, [c.text for c in cs]) for (_, r), cs in zip(mine, completions)],
                                    desc=f"verify {label}" if self.ranks.main else None)
            counts = verifier.counts.summary()
        verify_s = time.perf_counter() - t0
        parts = distributed.gather((completions, grades, counts, gen_s, verify_s))
        if not self.ranks.main:
            return {}, [], []
        completions, grades = _interleave([p[0] for p in parts]), _interleave([p[1] for p in parts])
        per_set, i = {}, 0
        for name, recs in self.sets.items():
            per_set[name] = set_metrics(recs, grades[i : i + len(recs)])
            i += len(recs)
        verifier_counts = {k: sum(p[2][k] for p in parts) for k in parts[0][2]}
        metrics = {
            "k": ev.k,
            "k_per_set": {name: ev.k_for(name) for name in self.sets},
            "mean": mean_over({n: {k: v for k, v in m.items() if k != "levels"} for n, m in per_set.items()}),
            "benchmarks": per_set,
            "generation": _generation_stats(completions, max(p[3] for p in parts), self.rollout_engine.start_seconds),
            "verifier": {**verifier_counts, "seconds": round(max(p[4] for p in parts), 2)},
            "grader": self.params.verifier.grader,
            "ranks": self.ranks.world,
        }
        if data := data_sets(self.params):
            metrics["data"] = data
        if lost := skipped_rows(self.params, self.sets):
            metrics["skipped_rows"] = lost
        return (metrics, sample_rows(self.problems, completions, grades),
                problem_rows(self.problems, grades, completions))


def _interleave(parts: list[list]) -> list:
    """Undo the strided split problems[rank::world]."""
    out = []
    for i in range(max(len(p) for p in parts)):
        out += [p[i] for p in parts if i < len(p)]
    return out


def run_evaluation(model_path: str | Path, params: Params, out_dir: str | Path, rollout_engine=None) -> dict:
    """Evaluate the model and, for a trained run, the snapshots it kept (the
    best on validation, the paper's protocol's) unless already evaluated
    under these settings. Rank 0 writes samples.jsonl and metrics.json (the
    final model) and by_step.json (each snapshot and the final model, with
    their validation scores)."""
    from rlvr.rollout.vllm_engine import load_safetensors

    model_path, out_dir = Path(model_path), Path(out_dir)
    evaluator = Evaluator(params, str(model_path), rollout_engine)
    if rollout_engine is not None:  # an engine passed in holds whatever it held last
        rollout_engine.load_weights(load_safetensors(model_path))
    snapshots = _snapshots(model_path)
    by_step = _load_by_step(out_dir / BY_STEP, evaluator.settings_id(), snapshots)
    swapped = False  # the engine holds a snapshot's weights, not the model's
    for snap in snapshots[:-1]:
        if by_step["steps"].get(str(snap["step"]), {}).get("id") == snap["id"]:
            continue
        snap_dir = Path(model_path) / snap["path"]  # relative to the model: pulled with it
        if not snap_dir.exists():
            raise FileNotFoundError(
                f"snapshot {snap_dir} (step {snap['step']}) is missing: it is part of the train stage's output; "
                f"restore it with `dvc pull` or `dvc checkout`, or retrain (dvc repro -f train@...)")
        evaluator.rollout_engine.load_weights(load_safetensors(snap_dir))
        swapped = True
        metrics, _, problems = evaluator.evaluate(f"step {snap['step']}")
        _keep(by_step, snap, metrics, problems, out_dir, evaluator.ranks)
    if swapped:
        evaluator.rollout_engine.load_weights(load_safetensors(model_path))
    metrics, rows, problems = evaluator.evaluate("final")
    if evaluator.ranks.main:
        metrics["model"] = str(model_path)
        write_jsonl(out_dir / "samples.jsonl", rows)
        write_jsonl(out_dir / "problems.jsonl", problems)
        write_json(out_dir / "metrics.json", metrics)
        _keep(by_step, snapshots[-1], metrics, problems, out_dir, evaluator.ranks)
    return {"metrics": metrics, "rows": rows}


def _snapshots(model_path: Path) -> list[dict]:
    """The run's snapshots kept, the final model last (a base model: only itself)."""
    listing = model_path / SNAPSHOTS
    return json.loads(listing.read_text()) if listing.exists() else [{"step": None, "id": None, "path": "."}]


def _load_by_step(path: Path, settings: str, snapshots: list[dict]) -> dict:
    """The results kept from an earlier run of the stage: those of the
    snapshots still listed (same weights) under the same settings."""
    listed = {(str(s["step"]), s["id"]) for s in snapshots}
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("settings") == settings:
            saved["steps"] = {k: v for k, v in saved["steps"].items() if (k, v.get("id")) in listed}
            return saved
    return {"settings": settings, "steps": {}}


def _keep(by_step: dict, snap: dict, metrics: dict, problems: list[dict], out_dir: Path, ranks) -> None:
    """Record one snapshot's summary and per-problem results at once, so a
    killed stage resumes after it."""
    if not ranks.main or snap["step"] is None:
        return
    summary = {"mean": metrics["mean"], "benchmarks": {n: {k: v for k, v in m.items() if k != "levels"}
                                                       for n, m in metrics["benchmarks"].items()}}
    by_step["steps"][str(snap["step"])] = {"id": snap["id"], "best": snap.get("best", False),
                                           "protocol": snap.get("protocol", False),
                                           "validation": snap.get("validation"), **summary,
                                           "problems": [[p["correct"], p["majority"]] for p in problems]}
    write_json(out_dir / BY_STEP, by_step)


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


def model_source(params: Params, run) -> str | Path:
    """Where `run`'s weights are: its model directory, or a checkpoint's hub id or path."""
    if not run.external:
        return run.model_dir
    checkpoints = params.checkpoints
    if run.method not in checkpoints:
        raise ConfigError([unknown_name("checkpoints", run.method, tuple(checkpoints))], "params")
    source = checkpoints[run.method]
    if not Path(source).exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
        raise ConfigError([f"'checkpoints.{run.method}': '{source}' is neither a local directory nor reachable "
                           "(HF_HUB_OFFLINE=1); download it first or give its local path"], "params")
    return source


def evaluate_stage(params: Params, run) -> dict:
    """The evaluate stage: evaluate `run` (rlvr.runs.Run) on every rank, track
    it on rank 0; returns the one-line summary."""
    import torch

    from rlvr.tracking.names import headline_metrics
    from rlvr.tracking.provenance import dataset_input
    from rlvr.tracking.tracker import NullTracker, Tracker

    if run.external:
        params = params.evaluated_as(run.method)  # a released model may have its own eval: (the paper's 32k rows)
    ranks = distributed.ranks_from_env()
    if ranks.world > 1 or torch.cuda.is_available():  # CUDA: vLLM's external launcher joins this process group
        ranks = distributed.init(params.launcher.timeout_s)
    logged = {"eval": dataclasses.asdict(params.eval), "engine": dataclasses.asdict(params.engine),
              "prompt": dataclasses.asdict(params.prompt), "benchmarks": params.data.benchmark_names,
              "run": run.name, "model_path": str(model_source(params, run)), "ranks": ranks.world,
              "external": run.external}
    # A trained run's evaluation nests under its training, whose row in the runs table gets the headline.
    nesting = {"parent_stage": f"train@{run.name}"} if run.trained else {}
    tracker = Tracker.for_stage(params, f"evaluate@{run.name}", model=run.method, logged=logged, **nesting) \
        if ranks.main else NullTracker()
    with tracker:
        result = run_evaluation(model_source(params, run), params, run.eval_dir)
        if not ranks.main:
            return {}
        for name in ("arithmetic", *params.data.benchmark_names):
            tracker.log_dataset(dataset_input(params.data.eval_dir / f"{name}.jsonl", "eval"))
        tracker.log_metrics(flat_metrics(result["metrics"]))
        tracker.log_metrics(headline_metrics(result["metrics"]))
        if tracker.parent_run_id:
            tracker.log_metrics(headline_metrics(result["metrics"]), run_id=tracker.parent_run_id)
        tracker.log_table(result["rows"][: params.tracking.log_samples], "samples.json")
        tracker.log_artifact(run.eval_dir / "metrics.json")
        tracker.log_artifact(run.eval_dir / BY_STEP)
    m = result["metrics"]
    summary = {k: round(v, 3) for k, v in m["mean"].items() if "@" in k}
    summary["tok/s"] = m["generation"]["tokens_per_s"]
    return summary
