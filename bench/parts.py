"""One measurement each; `bench/run.py` runs every one in a fresh process.

The work is the default training step of params.yaml: B questions from the
prepared training set, n responses each, the same max response length and
sampling temperature, the same model. Every function returns a JSON-able dict;
the caller adds the process's peak resident memory.
"""

from __future__ import annotations

import dataclasses
import gc
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from rlvr.data.prompts import build_prompt
from rlvr.data.records import read_records
from rlvr.settings.load import load_params
from rlvr.settings.methods import MethodConfig, method_config

MODEL = "models/base"


@dataclass(frozen=True)
class Work:
    """What one RL step does, read from params.yaml."""

    questions: int  # B
    n: int
    max_tokens: int
    temperature: float
    micro_questions: int
    mini_questions: int
    lr: float
    model_dtype: str

    @property
    def updates_per_step(self) -> int:
        return self.questions // self.mini_questions


def default_work(method: str = "grpo") -> tuple[Work, MethodConfig]:
    params = load_params()
    mc = method_config(params, method)
    t = mc.train
    work = Work(t.questions_per_step, t.responses_per_question, t.max_response_tokens, t.temperature,
                t.micro_batch_questions, t.mini_batch_questions, t.lr, params.model.dtype)
    return work, mc


def questions(count: int, tokenizer) -> list[tuple[str, list[str]]]:
    """(prompt text, golds) of the first `count` training questions."""
    params = load_params()
    records = read_records(params.data.train_dir / "train.jsonl")[:count]
    return [(build_prompt(r.problem, tokenizer, params.prompt), r.golds) for r in records]


# ---- rollout ------------------------------------------------------------------


def _vllm_engine_and_prompts(rounds: int):
    """A started, warmed-up engine and the prompts of `rounds` batches."""
    from rlvr.rollout.vllm_engine import RolloutEngine

    work, _ = default_work()
    t0 = time.perf_counter()
    engine = RolloutEngine.from_params(MODEL, load_params().engine, work.model_dtype)
    start = time.perf_counter() - t0
    prompts = [p for p, _ in questions(work.questions * rounds, engine.tokenizer)]
    engine.generate(prompts[:1], n=1, temperature=work.temperature, top_p=1.0, max_tokens=8, progress=False)
    return engine, prompts, work, start


def _vllm_batch(engine, prompts: list[str], work: Work) -> list[int]:
    """Generate B x n responses; the number of tokens of each."""
    outs = engine.generate(prompts, n=work.n, temperature=work.temperature, top_p=1.0,
                           max_tokens=work.max_tokens, progress=False)
    return [len(c.token_ids) for o in outs for c in o]


def rollout_vllm(rounds: int = 2) -> dict:
    """The project's engine: `rounds` batches of B questions x n responses."""
    engine, prompts, work, start = _vllm_engine_and_prompts(rounds)
    tokens, seconds = 0, 0.0
    for r in range(rounds):
        t0 = time.perf_counter()
        tokens += sum(_vllm_batch(engine, prompts[r * work.questions:(r + 1) * work.questions], work))
        seconds += time.perf_counter() - t0
    return {"engine": "vllm", "dtype": work.model_dtype, "tokens": tokens, "seconds": seconds,
            "tokens_per_s": tokens / seconds, "engine_start_s": start}


# What each kind of op is called in vLLM's CPU path (first match wins).
OP_KINDS = (("matmul", ("onednn_mm", "aten::mm", "aten::addmm", "aten::bmm")),
            ("attention", ("attention", "attn", "kv_cache")),
            ("sampling", ("gumbel", "multinomial", "exponential", "argmax", "top_k", "top_p")))


def op_kind(name: str) -> str:
    low = name.lower()
    return next((kind for kind, keys in OP_KINDS if any(k in low for k in keys)), "other ops")


def time_by_kind(op_self_seconds: list[tuple[str, float]], wall_s: float) -> dict[str, float]:
    """Ops' self time summed per kind; the wall time no op accounts for is
    Python: scheduling, input preparation, output processing."""
    out = {kind: 0.0 for kind, _ in OP_KINDS} | {"other ops": 0.0}
    for name, seconds in op_self_seconds:
        out[op_kind(name)] += seconds
    out["python and scheduling"] = max(wall_s - sum(out.values()), 0.0)
    return out


def rollout_vllm_profile() -> dict:
    """One batch of the rollout work under torch's profiler: where vLLM's time goes.

    The engine runs in this process and thread, so every op it runs is seen.
    All requests start together, so the batch takes as many decode steps as
    its longest response.
    """
    engine, prompts, work, _ = _vllm_engine_and_prompts(2)
    _vllm_batch(engine, prompts[:work.questions], work)  # warm, as in the timed part
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        lengths = _vllm_batch(engine, prompts[work.questions:], work)
        wall = time.perf_counter() - t0
    ops = [(e.key, e.self_cpu_time_total / 1e6) for e in prof.key_averages()]
    return {"engine": "vllm", "dtype": work.model_dtype, "seconds": wall, "tokens": sum(lengths),
            "decode_steps": max(lengths), "seconds_by_kind": time_by_kind(ops, wall)}


def generated_lengths(new_tokens: torch.Tensor, eos_ids: set[int]) -> list[int]:
    """Tokens each row really generated: up to and including its first EOS."""
    lengths = []
    for row in new_tokens.tolist():
        end = next((i + 1 for i, t in enumerate(row) if t in eos_ids), len(row))
        lengths.append(end)
    return lengths


def rollout_hf(dtype: str = "float32", rounds: int = 2) -> dict:
    """transformers `generate`, batched, sampling at the same temperature (no top-k/top-p)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    work, _ = default_work()
    tok = AutoTokenizer.from_pretrained(MODEL, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=getattr(torch, dtype)).eval()
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    prompts = [p for p, _ in questions(work.questions * rounds, tok)]
    sample = dict(do_sample=True, temperature=work.temperature, top_p=1.0, top_k=0, pad_token_id=tok.pad_token_id)
    with torch.no_grad():
        model.generate(**tok(prompts[:1], return_tensors="pt"), max_new_tokens=8, **sample)  # warm-up
        tokens, seconds = 0, 0.0
        for r in range(rounds):
            batch = [p for p in prompts[r * work.questions:(r + 1) * work.questions] for _ in range(work.n)]
            enc = tok(batch, return_tensors="pt", padding=True)
            t0 = time.perf_counter()
            out = model.generate(**enc, max_new_tokens=work.max_tokens, **sample)
            seconds += time.perf_counter() - t0
            tokens += sum(generated_lengths(out[:, enc["input_ids"].shape[1]:], eos_ids))
    return {"engine": "transformers_generate", "dtype": dtype, "tokens": tokens, "seconds": seconds,
            "tokens_per_s": tokens / seconds}


# ---- RL steps -------------------------------------------------------------------


def _method(method: str, **train_overrides) -> MethodConfig:
    _, mc = default_work(method)
    train = dataclasses.replace(mc.train, **train_overrides)
    return dataclasses.replace(mc, train=train)


def _project_run(mc: MethodConfig, engine, tmp: Path) -> list[dict]:
    from rlvr.training.trainer import Trainer

    # No checkpoint inside the measured steps: the last one is written after them.
    mc = dataclasses.replace(mc, train=dataclasses.replace(mc.train, checkpoint_every=10**6))
    trainer = Trainer(load_params(), mc, MODEL, tmp / "run", tmp / "final", rollout_engine=engine)
    return trainer.train()


def step_summary(rows: list[dict]) -> dict:
    """Per-step wall time and phases; the mean skips step 1 (first-call warm-up)."""
    timed = rows[1:] or rows
    mean = lambda key: sum(r[key] for r in timed) / len(timed)  # noqa: E731
    phases = {p: mean(f"time_{p}") for p in ("rollout", "reward", "old_logprobs", "update", "weight_push")}
    return {
        "step_seconds": [r["time_total"] for r in rows],
        "mean_step_s": mean("time_total"),
        "phases_s": phases,
        "response_length": mean("response_length"),
        "rollout_tokens_per_s": mean("rollout_tokens_per_s"),
        "train_tokens_per_s": mean("train_tokens_per_s"),
    }


def project_step(method: str = "grpo", steps: int = 2) -> dict:
    """The project's RL step: vLLM rollout, verifier, old log-probs, DeepSpeed update, weight push."""
    from rlvr.rollout.vllm_engine import RolloutEngine

    params = load_params()
    mc = _method(method, steps=steps)
    engine = RolloutEngine.from_params(MODEL, params.engine, params.model.dtype)
    with tempfile.TemporaryDirectory() as tmp:
        rows = _project_run(mc, engine, Path(tmp))
    return {"framework": "rlvr", "method": method, **step_summary(rows)}


def project_scaling(steps: int = 1, ns=(4, 8, 16), lengths=(64, 128, 256)) -> dict:
    """Step time as n and the max response length grow (one engine for all)."""
    from rlvr.rollout.vllm_engine import RolloutEngine

    params = load_params()
    work, _ = default_work()
    engine = RolloutEngine.from_params(MODEL, params.engine, params.model.dtype)
    configs = [(n, work.max_tokens) for n in ns] + [(work.n, t) for t in lengths if t != work.max_tokens]
    out = []
    for n, t in configs:
        mc = _method("grpo", steps=steps, responses_per_question=n, max_response_tokens=t)
        with tempfile.TemporaryDirectory() as tmp:
            rows = _project_run(mc, engine, Path(tmp))
        out.append({"n": n, "max_tokens": t, **step_summary(rows)})
        gc.collect()
    return {"framework": "rlvr", "method": "grpo", "configs": out}


def rl_step_times(t_begin: float, update_ends: list[float], updates_per_step: int) -> list[float]:
    """Wall time of each RL step from the end times of optimizer updates.

    An RL step is one generation plus `updates_per_step` optimizer updates, so
    it ends at every `updates_per_step`-th update.
    """
    ends = update_ends[updates_per_step - 1::updates_per_step]
    return [b - a for a, b in zip([t_begin, *ends], ends)]


def trl_step(steps: int = 2) -> dict:
    """TRL's GRPOTrainer on the same work (transformers generate; TRL's vLLM mode needs CUDA)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlvr.grading.pool import Verifier

    work, mc = default_work("grpo")
    params = load_params()
    tok = AutoTokenizer.from_pretrained(MODEL, padding_side="left")
    rows = questions(200, tok)
    data = Dataset.from_list([{"prompt": p, "golds": g} for p, g in rows])
    verifier = Verifier(params.verifier.workers, params.verifier.timeout_s, params.verifier.group_timeout_s)

    def correct(completions, golds, **_):
        grades = verifier.grade([(g, [c]) for c, g in zip(completions, golds)])
        return [float(g.items[0].correct) for g in grades]

    class Clock(TrainerCallback):
        begin, ends, lengths = 0.0, [], []

        def on_train_begin(self, *a, **k):
            Clock.begin = time.perf_counter()

        def on_step_end(self, *a, **k):
            Clock.ends.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **k):
            if logs and "completions/mean_length" in logs:
                Clock.lengths.append(logs["completions/mean_length"])

    cfg = GRPOConfig(
        output_dir=tempfile.mkdtemp(), use_cpu=True, bf16=work.model_dtype == "bfloat16", seed=0,
        per_device_train_batch_size=work.micro_questions * work.n,
        gradient_accumulation_steps=work.mini_questions // work.micro_questions,
        steps_per_generation=work.questions // work.micro_questions,
        num_generations=work.n, max_completion_length=work.max_tokens, temperature=work.temperature, top_p=1.0,
        top_k=0, learning_rate=work.lr, beta=0.0, loss_type="grpo", epsilon=mc.objective.clip_low,
        max_grad_norm=mc.train.grad_clip, max_steps=steps * work.updates_per_step, logging_steps=1,
        save_strategy="no", report_to="none", log_completions=False, dataloader_num_workers=0,
        disable_tqdm=True,
    )
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=getattr(torch, work.model_dtype))
    trainer = GRPOTrainer(model=model, reward_funcs=correct, args=cfg, train_dataset=data,
                          processing_class=tok, callbacks=[Clock()])
    trainer.train()
    verifier.close()
    times = rl_step_times(Clock.begin, Clock.ends, work.updates_per_step)
    timed = times[1:] or times
    return {"framework": "trl", "method": "grpo", "trl_version": __import__("trl").__version__,
            "step_seconds": times, "mean_step_s": sum(timed) / len(timed),
            "response_length": sum(Clock.lengths) / max(len(Clock.lengths), 1)}


PARTS = {
    "rollout_vllm": rollout_vllm,
    "rollout_vllm_profile": rollout_vllm_profile,
    # transformers in both precisions: the baseline is whichever is faster here
    "rollout_hf_float32": lambda: rollout_hf("float32"),
    "rollout_hf_bfloat16": lambda: rollout_hf("bfloat16"),
    "step_rlvr_grpo": lambda: project_step("grpo"),
    "step_rlvr_disco_logl": lambda: project_step("disco_logl"),
    "step_trl_grpo": trl_step,
    "scaling": project_scaling,
}


def step_ranks(steps: int = 3) -> dict:
    """The default grpo step on 1 rank (one core) and on 2 ranks (a core each)
    under the DeepSpeed launcher, from the trainer's own step times."""
    import csv
    import os
    import shutil
    import subprocess
    import sys

    import yaml

    repo = Path.cwd()
    runs = []
    for world in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for f in ("params.yaml", "stages", ".dvc"):
                (shutil.copytree if (repo / f).is_dir() else shutil.copy2)(repo / f, root / f)
            (root / "data").mkdir()
            os.symlink(repo / "data/prepared", root / "data/prepared")
            os.symlink(repo / "models", root / "models")
            raw = yaml.safe_load((root / "params.yaml").read_text())
            raw["train"]["steps"] = steps
            raw["launcher"].update({"kind": "deepspeed", "procs_per_node": world, "master_port": 29650 + world})
            (root / "params.yaml").write_text(yaml.safe_dump(raw))
            cmd = [sys.executable, "stages/train.py", "--method", "grpo"]
            if world == 1:
                cmd = ["taskset", "-c", "0", *cmd]
            env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{root}/mlflow.db"}
            done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(done.stderr[-2000:])
            with open(root / "reports/train/grpo/seed0/steps.csv") as f:
                rows = [{k: float(v) for k, v in r.items() if v} for r in csv.DictReader(f)]
            runs.append({"ranks": world, **step_summary(rows)})
    return {"runs": runs, "ratio": runs[1]["mean_step_s"] / runs[0]["mean_step_s"]}


PARTS["step_ranks"] = step_ranks
