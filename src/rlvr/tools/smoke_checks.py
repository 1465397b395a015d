"""The smoke's checks of a trained step: the grader, training and resuming,
the weight push to the engine, and each step's rows (rewards, memory,
validation, phases), each a verdict line in the smoke's Report."""

from __future__ import annotations

import gc
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path

PUSH_TOLERANCE = {"bfloat16": 0.05, "float16": 0.05, "float32": 1e-3}  # mean |engine - trainer| per token
GIB = 1 << 30


class Report:
    """Checks in order, printed by rank 0."""

    def __init__(self, main: bool, screen=None):
        self.main, self.failed, self.screen = main, [], screen or sys.stdout

    def say(self, line: str) -> None:
        if self.main:
            print(line, file=self.screen, flush=True)

    def check(self, name: str, ok: bool | None, saw: str) -> None:
        """ok None: reported, not judged."""
        if ok is False:
            self.failed.append(name)
        self.say(f"{'PASS' if ok else 'FAIL' if ok is False else 'INFO'}  {name:<11} {saw}")


def check_grader(params, report: Report) -> None:
    """The recipe's grader, from this process (CUDA torch loaded where there is
    one), on the training set's golds written as boxed final answers."""
    from rlvr.data.records import read_records
    from rlvr.grading.pool import Verifier

    records = read_records(params.data.train_dir / "train.jsonl")[:16]
    marker = params.prompt.answer_after or ""
    groups = [(r.golds, [f"Reasoning.{marker} The answer is \\boxed{{{r.golds[0]}}}."]) for r in records]
    with Verifier.from_params(params, half="train") as v:
        grades = v.grade(groups)
        counts, info = v.counts.summary(), v.worker_info[0]
    right = sum(g.items[0].correct for g in grades)
    report.check("grader", counts["timeouts"] == counts["errors"] == 0 and right >= len(groups) // 2,
                 f"{params.verifier.grader}: {right}/{len(groups)} boxed golds graded correct, {counts['timeouts']} "
                 f"timeouts, {counts['errors']} errors; workers {info['address_space'] / GIB:.2f} GiB each, limit "
                 f"{info['limit'] / GIB:.2f} GiB, torch imported: {info['torch_loaded']}")


def train_and_resume(params, method, base: str, engine, work: Path, report: Report) -> tuple[list[dict], list]:
    """Step 1, stopped after it as a scheduler's SIGTERM stops a run (a
    checkpoint, then TrainingStopped), and the push check; then a new trainer
    that resumes from the checkpoint and runs step 2. Returns the step log and
    the grade counts over every rank."""
    from rlvr import distributed
    from rlvr.training.trainer import Trainer, TrainingStopped

    run_dir, final = work / "run" / method.name, work / "models" / method.name
    prompt, response, before = fixed_response(params, engine, base)
    first = Trainer(params, method, base, run_dir, final, rollout_engine=engine)
    first.request_stop(after_step=1)
    try:
        first.train()
        stopped = "ran to the end"
    except TrainingStopped as e:
        stopped = str(e)
    report.check("stop", stopped.startswith("stopped by request after step 1") and (run_dir / "checkpoint").exists(),
                 f"a stop requested during step 1: {stopped}")
    check_push(first, engine, prompt, response, before, params.model.dtype, report)
    counts = [first.verifier.counts]
    first.ds_engine.destroy()
    del first
    gc.collect()
    _empty_cache()
    second = Trainer(params, method, base, run_dir, final, rollout_engine=engine)
    rows = second.train()
    counts.append(second.verifier.counts)
    history = second.outputs.history() if second.ranks.main else []
    report.check("resume", [r["step"] for r in rows] == [2] and [int(r["step"]) for r in history] in ([1, 2], []),
                 f"a second trainer ran steps {[r['step'] for r in rows]} from the checkpoint at step 1; "
                 f"the step log holds steps {[int(r['step']) for r in history]}")
    totals = [sum(c.total for c in counts), sum(c.by_status["timeout"] + c.by_status["error"] for c in counts)]
    return history, distributed.all_sum(totals)


def fixed_response(params, engine, base: str) -> tuple[list[int], list[int], list[float]]:
    """A response the engine writes to the first validation problem before any
    step, and its log-probs under the initial weights."""
    from transformers import AutoTokenizer

    from rlvr.data.prompts import prompt_token_ids
    from rlvr.data.records import read_records

    record = read_records(params.data.validation_file)[0]
    prompt = prompt_token_ids(record.problem, AutoTokenizer.from_pretrained(base), params.prompt.for_training(),
                              record.system)
    response = engine.generate([prompt], n=1, temperature=0.0, top_p=1.0, max_tokens=32,
                               progress=False)[0][0].token_ids
    return prompt, response, engine.token_logprobs(prompt, response)


def check_push(trainer, engine, prompt, response, before, dtype: str, report: Report) -> None:
    """After step 1 the engine serves the trainer's weights; then a known change
    (the final norm's weights x 1.5) goes through the same sleep, push and wake
    and reaches the engine, and so does undoing it. Step 1 alone may leave the
    weights as they were (a step whose groups all have equal rewards has no
    gradient), so the known change is what proves the push."""
    after = engine.token_logprobs(prompt, response)
    tolerance = PUSH_TOLERANCE.get(dtype, 0.05)
    agree = _gap(after, trainer_logprobs(trainer, prompt, response))
    step_moved = _gap(after, before)
    with final_norm_scaled(trainer, 1.5):
        engine.sleep()
        trainer.push_weights()
        changed = engine.token_logprobs(prompt, response)
        agree_changed = _gap(changed, trainer_logprobs(trainer, prompt, response))
    engine.sleep()
    trainer.push_weights()
    restored = _gap(engine.token_logprobs(prompt, response), after)
    moved = _gap(changed, after)
    worst = max(agree, agree_changed, restored)
    report.check("push", worst < tolerance and moved > 5 * worst,
                 f"engine vs trainer log-probs of a fixed {len(response)}-token response, per token: "
                 f"{agree:.4f} after step 1 (which moved them {step_moved:.4f}); the final norm x 1.5 pushed moved "
                 f"them {moved:.3f} and the two agree to {agree_changed:.4f}; undone: {restored:.4f} "
                 f"(tolerance {tolerance})")


def _gap(a: list[float], b: list[float]) -> float:
    return sum(abs(x - y) for x, y in zip(a, b)) / max(len(a), 1)


def trainer_logprobs(trainer, prompt: list[int], response: list[int]) -> list[float]:
    import torch

    from rlvr.training.packing import pack
    from rlvr.training.policy import evaluate_tokens

    with torch.no_grad():
        packed = pack([prompt], [response], trainer.pad_id).to(trainer.device)
        out = evaluate_tokens(trainer.ds_engine.module, packed, 1.0)
    return out["logp"][0, : len(response)].float().tolist()


@contextmanager
def final_norm_scaled(trainer, factor: float):
    """The trainer's last norm weights times `factor` while inside (ZeRO-3: gathered and scattered back)."""
    import torch

    module = trainer.ds_engine.module
    name, weight = [(n, p) for n, p in module.named_parameters() if n.endswith("norm.weight")][-1]

    def gathered():
        if trainer.settings.zero_stage != 3:
            return nullcontext()
        import deepspeed

        return deepspeed.zero.GatheredParameters([weight], modifier_rank=0)

    with gathered(), torch.no_grad():
        saved = weight.detach().clone()
        weight.mul_(factor)
    try:
        yield name
    finally:
        with gathered(), torch.no_grad():
            weight.copy_(saved)


def check_rows(params, method, rows: list[dict], counts: list[float], tiny: bool, report: Report) -> None:
    from rlvr.tools import memory
    from rlvr.training.step_metrics import PHASES

    if not report.main:
        return
    rewards = [r.get("reward_mean", 0.0) for r in rows]
    graded, failed = counts
    report.check("rewards", failed < graded and max(rewards) > 0,
                 f"{graded:.0f} responses graded, {failed:.0f} timed out or failed; reward mean per step "
                 f"{[round(x, 3) for x in rewards]}" + (" (a tiny model taught to answer one-digit additions in "
                                                       "the recipe's answer form)" if tiny else ""))
    report.check("validation", all("val_avg@k" in r for r in rows),
                 f"val avg@k per step {[round(r.get('val_avg@k', float('nan')), 3) for r in rows]}")
    measured = {k: max(r.get(k, 0.0) for r in rows) for k in ("gpu_rollout_gib", "gpu_update_gib")}
    if any(measured.values()):
        import torch

        gpu = torch.cuda.get_device_properties(0).total_memory
        est = memory.budget(params, method, memory.model_shape(params), gpu)
        ok = measured["gpu_rollout_gib"] <= est["rollout_total"] / GIB and \
            measured["gpu_update_gib"] <= est["update_total"] / GIB
        report.check("memory", ok, f"peak per GPU: rollout {measured['gpu_rollout_gib']:.1f} GiB (estimate "
                     f"{est['rollout_total'] / GIB:.1f}), update {measured['gpu_update_gib']:.1f} GiB (estimate "
                     f"{est['update_total'] / GIB:.1f}) of {gpu / GIB:.1f}")
    else:
        report.check("memory", None, "no CUDA: nothing to measure")
    for r in rows:
        phases = ", ".join(f"{p} {r[f'time_{p}']:.1f} s" for p in (*PHASES, "validation") if f"time_{p}" in r)
        report.check("phases", None, f"step {int(r['step'])}: {phases}; total {r.get('time_total', 0):.1f} s")


def _empty_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
