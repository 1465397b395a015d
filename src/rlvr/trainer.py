"""The RL loop: vLLM rollouts -> verifier rewards -> DeepSpeed updates -> weight push.

One rollout step, on every rank of a data-parallel job (one rank without a launcher):
  1. this rank's share of the step's B questions, n responses each from its
     own vLLM engine (pi_old), graded and shaped (rlvr.rollout_groups)
  2. the update (rlvr.update): pi_old's log-probs, then epochs x mini-batches
     of loss calls, one optimizer step per mini-batch; the objective's
     settings say what the loss needs (entropies, whole groups, a reference
     model, an anchor), so nothing here knows an objective by name
  3. the new weights pushed into this rank's vLLM engine in place
  4. metrics reduced over ranks (rlvr.step_metrics); rank 0 writes them
  5. every train.eval_every steps and at the last: validation, the light
     profile (validation:) on the problems held out of the training mixture,
     in the same engine; a step that beats every earlier one is kept as an
     HF snapshot (the best on validation), the one it beats is deleted once a
     checkpoint records the new best

Rank 0 alone writes steps.csv, MLflow, snapshots and the final model
(rlvr.run_files); checkpoints are collective.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import shutil
import signal
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import torch
from tqdm.auto import tqdm

from rlvr import checkpoint, distributed
from rlvr.config import Params, settings_hash
from rlvr.data.records import read_records
from rlvr.gpu_memory import PhaseMemory
from rlvr.methods import MethodConfig
from rlvr.objectives import registry
from rlvr.grading.pool import Verifier
from rlvr.rollout_groups import Collected, Group, QuestionSampler, RolloutCollector, training_groups
from rlvr.run_files import Snapshots, StepLog
from rlvr.step_metrics import PHASES, StepMetrics
from rlvr.train_engine import policy_engines
from rlvr.update import PolicyUpdate


class TrainingStopped(RuntimeError):
    pass


class PhaseTimer:
    def __init__(self):
        self.seconds = defaultdict(float)

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        yield
        self.seconds[name] += time.perf_counter() - t0


def warmup_lr(step: int, lr: float, warmup_steps: int) -> float:
    """The learning rate of rollout step `step` (0-based): linear warm-up over
    `warmup_steps` rollout steps, then constant. As in verl's constant schedule
    with warm-up, stepped once per rollout step after the update, the first
    step runs at 0 (factors 0, 1/W, ..., (W-1)/W, then 1)."""
    return lr if warmup_steps <= 0 else lr * min(1.0, step / warmup_steps)


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


class Trainer:
    def __init__(self, params: Params, method: MethodConfig, model_path: str, run_dir: str | Path,
                 final_dir: str | Path, tracker=None, rollout_engine=None, steps_file: str | Path | None = None):
        self.params, self.method = params, method
        self.settings, self.objective = method.train, method.objective  # TrainParams, the objective's params
        self.prompt = params.prompt.for_training()
        self.model_path, self.run_dir, self.final_dir = str(model_path), Path(run_dir), Path(final_dir)
        self.ckpt_dir = self.run_dir / "checkpoint"
        self.steps_file = Path(steps_file) if steps_file else self.run_dir / "steps.csv"
        self.step_log = StepLog(self.steps_file)
        self.tracker = tracker
        self.ranks = distributed.ranks_from_env()
        self.anchor: float | None = None  # the objective's constant from its first step (Needs.anchor)
        self.bad_in_a_row = 0
        self._stop_signal = None
        self.rollout_engine = rollout_engine
        self.validator = None  # an Evaluator on the held-out problems, built on the first validation
        self.best: dict | None = None  # the best validation so far: {"step", "score"}

    # ---- set-up -------------------------------------------------------------

    def setup(self) -> int:
        """Build the engines; resume from the checkpoint if it matches. Returns the next step."""
        from transformers import AutoTokenizer

        self.ranks = distributed.init(self.params.launcher.timeout_s)
        self.device = self.ranks.device  # this rank's GPU (cuda:LOCAL_RANK), or the CPU
        self._share_cpu()
        # vLLM runs in-process and samples from the global torch generator, so
        # the global seed is the rank's rollout seed: one seed would make every
        # rank draw the same responses.
        rollout_seed = self.params.engine.seed + 1000 * self.settings.seed + self.ranks.rank
        torch.manual_seed(rollout_seed)
        random.seed(rollout_seed)
        train_file = self.params.data.train_dir / "train.jsonl"
        self.sampler = QuestionSampler(read_records(train_file), self.settings.seed)
        self.hash = settings_hash(dataclasses.asdict(self.settings), dataclasses.asdict(self.objective),
                                  self.model_path, file_digest(train_file), dataclasses.asdict(self.prompt),
                                  self.ranks.world, *self._validation_settings(self.params.data.validation_file))
        self.snapshots = Snapshots(self.run_dir / "snapshots", self.hash)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        needs = self.objective.needs()
        self.ds_engine, ref_model = policy_engines(self.model_path, self.settings, needs.reference_model,
                                                   self.ranks.world, self.device)
        self.update = PolicyUpdate(self.ds_engine, registry.objective(self.objective.objective).loss, self.objective,
                                   self.settings, self.pad_id, self.ranks, self.device, ref_model=ref_model)
        if self.rollout_engine is None:
            from rlvr.rollout_engine import RolloutEngine

            self.rollout_engine = RolloutEngine.from_params(self.model_path, self.params.engine,
                                                            self.params.model.dtype, seed=rollout_seed,
                                                            sleep_mode=True)
        self.verifier = Verifier.from_params(self.params)
        self.collector = RolloutCollector(self.rollout_engine, self.verifier, self.tokenizer, self.prompt,
                                          self.settings, self.objective, self.sampler, self.ranks)
        return self._resume()

    def _validation_settings(self, path: Path) -> list:
        """What the choice of the best checkpoint depends on (nothing without validation)."""
        if not self.settings.eval_every:
            return []
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: train.eval_every validates on problems held out of the "
                                    "training mixture; set data.validation_size and run dvc repro prepare_data")
        return [file_digest(path), dataclasses.asdict(self.params.validation)]

    def _share_cpu(self) -> None:
        """CPU ranks of one node split its cores, so they do not oversubscribe it."""
        if torch.cuda.is_available() or self.ranks.world == 1:
            return
        cores = distributed.cpu_threads(self.params.launcher.procs_per_node)
        torch.set_num_threads(len(cores))
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cores)))

    def _resume(self) -> int:
        state = checkpoint.read_state(self.ckpt_dir)
        if state is None:
            self._truncate_steps(0)
            return 0
        if state.get("params_hash") != self.hash:
            self._say(f"checkpoint at step {state.get('step')} was made with other training params: starting fresh")
            checkpoint.discard(self.ckpt_dir)
            if self.ranks.main:
                shutil.rmtree(self.snapshots.root, ignore_errors=True)
            self._truncate_steps(0)
            return 0
        state = checkpoint.load(self.ds_engine, self.ckpt_dir, self.ranks)
        self.sampler.position = state["data_position"]
        self.anchor = state.get("entropy_anchor")
        self.best = state.get("best")
        self.prune_snapshots()
        self._truncate_steps(state["step"])
        self.push_weights()
        self._say(f"resumed from step {state['step']}")
        return state["step"]

    def _say(self, text: str) -> None:
        if self.ranks.main:
            print(f"[train@{self.method.name}] {text}", flush=True)

    # ---- the loop -------------------------------------------------------------

    def train(self) -> list[dict]:
        start = self.setup()
        steps, every = self.settings.steps, self.settings.eval_every
        previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        rows = []
        try:
            bar = tqdm(range(start, steps), initial=start, total=steps, desc=f"train {self.method.name}",
                       disable=not self.ranks.main)
            for step in bar:
                row = self.step(step)
                rows.append(row)
                bar.set_postfix(reward=f"{row['reward_mean']:.3f}", kl=f"{row['kl']:.2e}", s=f"{row['time_total']:.0f}")
                done = step + 1
                improved = every > 0 and (done % every == 0 or done == steps) and self.validate(done, row)
                self._record(row)
                # Every rank must stop at the same step, whichever got the signal.
                stop = distributed.any_rank(self._stop_signal is not None)
                if improved and done < steps:
                    self.save_snapshot(done)  # before the checkpoint: a resumed run never lacks it
                if done % self.settings.checkpoint_every == 0 or done == steps or stop:
                    self._save(done)
                    self.prune_snapshots()
                if stop:
                    raise TrainingStopped(f"stopped by signal {self._stop_signal or 'on another rank'} after "
                                          f"step {done}; rerun to resume from the checkpoint")
            self._save_final()
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.verifier.close()
        return rows

    def _on_sigterm(self, signum, frame):
        self.request_stop(signum)

    def request_stop(self, reason=signal.SIGTERM) -> None:
        """Finish the step, checkpoint, then stop (TrainingStopped), as a scheduler's SIGTERM does."""
        self._stop_signal = reason

    def step(self, step: int, groups: list[Group] | None = None) -> dict:
        """One rollout step. `groups` (this rank's share, already graded) skips
        the rollout: tests and benchmarks drive the update with them."""
        timer, metrics, memory = PhaseTimer(), StepMetrics(), PhaseMemory(self.device)
        t0 = time.perf_counter()
        collected = self.collector.collect(timer) if groups is None else Collected(groups, 0, 0)
        memory.rollout_done()
        lr = warmup_lr(step, self.settings.lr, self.settings.warmup_steps)
        for g in self.ds_engine.optimizer.param_groups:
            g["lr"] = lr
        self.rollout_engine.sleep()  # frees the GPU memory vLLM holds (KV cache, weights) for the update
        groups = training_groups(collected.groups, self.settings, self.ranks)
        memory.update_starts()
        self.anchor, self.old_pass_groups = self.update.run(groups, self.sampler.position, self.anchor, metrics, timer)
        memory.update_done()
        metrics.maxima.update(memory.gib)
        with timer("weight_push"):
            self.push_weights()  # wakes the engine with the new weights
        metrics.add_groups(collected.groups)
        metrics.totals.update(rollout_tokens=collected.rollout_tokens, rollout_rounds=collected.rounds)
        metrics.maxima.update({f"time_{p}": timer.seconds[p] for p in PHASES})
        metrics.maxima["time_total"] = time.perf_counter() - t0
        row = {"step": step + 1, **metrics.reduce(), "lr": lr}
        if self.anchor is not None:
            row["entropy_anchor"] = self.anchor
        self._check_bad_steps(row.pop("skipped_step", 0.0) > 0)
        return row

    def _check_bad_steps(self, bad: bool) -> None:
        """`bad` is already reduced over ranks, so every rank stops together."""
        self.bad_in_a_row = self.bad_in_a_row + 1 if bad else 0
        if self.bad_in_a_row >= self.settings.max_bad_steps:
            self._save(None)
            raise TrainingStopped(f"{self.bad_in_a_row} steps in a row had non-finite losses; "
                                  "lower train.lr or check the data; a checkpoint was saved")

    def validate(self, step: int, row: dict) -> bool:
        """Score the engine's weights (this step's, just pushed) with the
        validation profile; adds val_* to `row`. True when the step beats
        every earlier validation (ties keep the earlier step). Collective."""
        if self.validator is None:
            from rlvr.evaluation import Evaluator

            held_out = read_records(self.params.data.validation_file)
            self.validator = Evaluator(self.params, self.model_path, self.rollout_engine,
                                       sets={"validation": held_out}, profile=self.params.validation,
                                       prompt=self.prompt)
        t0 = time.perf_counter()
        metrics, _, _ = self.validator.evaluate(f"validate step {step}")
        mean = metrics.get("mean", {})
        score = distributed.all_sum([mean.get("avg@k", 0.0) if self.ranks.main else 0.0])[0]  # rank 0's
        row.update({f"val_{m}": mean[m] for m in ("avg@k", "pass@k", "maj@k") if m in mean})
        row["time_validation"] = time.perf_counter() - t0
        if self.best is not None and score <= self.best["score"]:
            return False
        self.best = {"step": step, "score": score}
        return True

    def push_weights(self) -> None:
        """This rank's weights into its rollout engine (waking it if asleep)."""
        with self._full_weights() as weights:
            self.rollout_engine.load_weights(weights)

    @contextmanager
    def _full_weights(self):
        """This rank's full weights (ZeRO-3 gathers its partitions first)."""
        module = self.ds_engine.module
        if self.settings.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(module.parameters())):
                yield [(n, p.detach().clone()) for n, p in module.state_dict().items()]
        else:
            yield ((n, p.detach()) for n, p in module.state_dict().items())

    # ---- outputs ------------------------------------------------------------------

    def _record(self, row: dict) -> None:
        """Append to steps.csv and MLflow, on rank 0."""
        if not self.ranks.main:
            return
        self.step_log.append(row)
        if self.tracker is not None:
            self.tracker.log_metrics({k: v for k, v in row.items() if k != "step"}, step=row["step"])

    def history(self) -> list[dict[str, float]]:
        """Every recorded step of this run, resumed ones included, as numbers."""
        return self.step_log.history()

    def _truncate_steps(self, last_step: int) -> None:
        if self.ranks.main:
            self.step_log.truncate(last_step)

    def _save(self, step: int | None) -> None:
        step = step if step is not None else self._last_step()
        checkpoint.save(self.ds_engine, self.ckpt_dir, {
            "step": step, "data_position": self.sampler.position, "entropy_anchor": self.anchor,
            "params_hash": self.hash, "method": self.method.name, "world": self.ranks.world, "best": self.best,
        }, self.ranks)

    def _last_step(self) -> int:
        last = self.step_log.last_step() if self.ranks.main else 0
        return int(distributed.all_sum([float(last)])[0])

    def _save_hf(self, out_dir: Path) -> None:
        from rlvr.model import save_checkpoint

        with self._full_weights():  # ZeRO-3: every rank takes part in the gather
            if self.ranks.main:
                save_checkpoint(self.ds_engine.module, self.tokenizer, out_dir)
        distributed.barrier()

    def save_snapshot(self, step: int) -> None:
        """An HF snapshot of the best step so far, marked with its identity. Collective."""
        self._save_hf(self.snapshots.dir(step))
        if self.ranks.main:
            self.snapshots.mark(step)

    def prune_snapshots(self) -> None:
        """Delete the snapshots that can no longer be chosen (rank 0)."""
        if self.ranks.main:
            self.snapshots.prune(self.best["step"] if self.best else None)

    def _save_final(self) -> None:
        """The trained weights as a plain HF checkpoint, the best-on-validation
        snapshot linked beside it when it is an earlier step, and their list
        (what the evaluate stage scores with the full protocol)."""
        self._save_hf(self.final_dir)
        if self.ranks.main:
            self.snapshots.link_into(self.final_dir, self.best, self.settings.steps, self._validation_scores())

    def _validation_scores(self) -> dict[int, float]:
        return {int(r["step"]): r["val_avg@k"] for r in self.history() if "val_avg@k" in r}
