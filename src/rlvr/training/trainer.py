"""The RL loop: vLLM rollouts -> verifier rewards -> DeepSpeed updates -> weight push.

One rollout step, on every rank of a data-parallel job (one rank without a launcher):
  1. this rank's share of the step's B questions, n responses each from its own
     vLLM engine (pi_old), graded and shaped (rlvr.rollout.groups)
  2. the update (rlvr.training.update): pi_old's log-probs, then epochs x mini-batches of
     loss calls, one optimizer step per mini-batch, as the objective's settings say
     (nothing here knows an objective by name)
  3. the new weights pushed into this rank's vLLM engine in place
  4. metrics reduced over ranks (rlvr.training.step_metrics); rank 0 writes them
  5. every train.eval_every steps and at the last: validation (the light profile,
     validation:) on the problems held out of the training mixture; a step that beats
     every earlier one is kept as the best-on-validation snapshot

Rank 0 alone writes steps.csv, MLflow, snapshots and the final model (rlvr.run_files);
checkpoints are collective.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from rlvr import distributed
from rlvr.data.records import read_records
from rlvr.grading.pool import GradingFailed, Verifier
from rlvr.rollout.groups import Collected, Group, QuestionSampler, RolloutCollector, training_groups
from rlvr.run_files import Snapshots, StepLog
from rlvr.schema import settings_hash
from rlvr.settings.methods import MethodConfig
from rlvr.settings.sections import Params
from rlvr.stopping import StopRequest, TrainingFailed, TrainingStopped
from rlvr.tracking.tracker import NullTracker
from rlvr.training import checkpoint, resume
from rlvr.training.deepspeed_engine import full_weights, policy_engines, warmup_lr
from rlvr.training.gpu_memory import PhaseMemory
from rlvr.training.outputs import RunOutputs
from rlvr.training.run_lock import RunLock, hold
from rlvr.training.step_metrics import PHASES, PhaseTimer, StepMetrics
from rlvr.training.update import PolicyUpdate


class StepAbandoned(Exception):
    """A stop was asked for, or the grading failed (args: its cause on the rank
    where it failed, None on the others), before this step's update: the step's
    rollout is dropped."""


class Trainer:
    def __init__(self, params: Params, method: MethodConfig, model_path: str, run_dir: str | Path,
                 final_dir: str | Path, tracker=None, rollout_engine=None, steps_file: str | Path | None = None,
                 fresh_on_change: bool = True, fresh_if_damaged: bool = False):
        """`fresh_on_change`: a checkpoint made from other inputs is set aside (saying
        which inputs changed) and training starts over; False: StaleCheckpoint.
        `fresh_if_damaged` (asked for: --fresh): a damaged checkpoint is set aside
        too; False: DamagedCheckpoint, naming the file."""
        self.params, self.method = params, method
        self.settings, self.objective = method.train, method.objective  # TrainParams, the objective's params
        self.prompt = params.prompt.for_training()
        self.model_path, self.run_dir, self.final_dir = str(model_path), Path(run_dir), Path(final_dir)
        self.ckpt_dir = self.run_dir / "checkpoint"
        self.steps_file = Path(steps_file) if steps_file else self.run_dir / "steps.csv"
        self.step_log = StepLog(self.steps_file)
        self.tracker = tracker or NullTracker()
        self.ranks = distributed.ranks_from_env()
        self.anchor: float | None = None  # the objective's constant from its first step (Needs.anchor)
        self.bad_in_a_row = 0
        self.lock = RunLock(self.run_dir, self._say, params.launcher.timeout_s)  # one trainer per run
        self.stop = StopRequest(self._say, on_request=self.lock.stopping)
        self.stop_after: int | None = None  # request_stop(after_step)
        self.saved_step = 0  # the step the checkpoint on disk holds
        self.last_groups: list[Group] = []
        self.rollout_engine, self.fresh_on_change = rollout_engine, fresh_on_change
        self.fresh_if_damaged = fresh_if_damaged
        self.validator = None  # an Evaluator on the held-out problems, built on the first validation
        self.best: dict | None = None  # the best validation so far: {"step", "score"}

    # ---- set-up -------------------------------------------------------------

    def setup(self) -> int:
        """Build the engines; resume from the checkpoint if it matches. Returns the next step."""
        from transformers import AutoTokenizer

        self.ranks = distributed.init(self.params.launcher.timeout_s)
        self.device = self.ranks.device  # this rank's GPU (cuda:LOCAL_RANK), or the CPU
        distributed.share_cpu_cores(self.ranks, self.params.launcher.procs_per_node)
        # vLLM runs in-process and samples from the global torch generator, so
        # the global seed is the rank's rollout seed: one seed would make every
        # rank draw the same responses.
        rollout_seed = self.params.engine.seed + 1000 * self.settings.seed + self.ranks.rank
        torch.manual_seed(rollout_seed)
        random.seed(rollout_seed)
        train_file = self.params.data.train_dir / "train.jsonl"
        self.sampler = QuestionSampler(read_records(train_file), self.settings.seed)
        self.identity = checkpoint.run_identity(self.params, self.method, self.prompt, self.model_path, train_file,
                                                self.ranks.world)
        self.hash = settings_hash(self.identity)
        self.snapshots = Snapshots(self.run_dir / "snapshots", self.hash, self.settings.snapshot_every)
        self.outputs = RunOutputs(self.ranks, self.step_log, self.tracker, self.ckpt_dir, self.final_dir, self.snapshots,
                                  self.settings.zero_stage, self.params.tracking.log_completions)
        hold(self.lock, self.ranks)
        state = resume.usable_state(self.ckpt_dir, self.identity, self.fresh_on_change, self._say,
                                    self.outputs.set_aside, self.fresh_if_damaged,
                                    resume.fresh_hint(self.method.name, self.settings.seed))  # before any engine
        self.tracker.start(resume=(state or {}).get("tracking_run_id"))  # a resumed training keeps its run
        self.tokenizer = self.outputs.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        needs = self.objective.needs()
        self.ds_engine, ref_model = policy_engines(self.model_path, self.settings, needs.reference_model,
                                                   self.ranks.world, self.device)
        self.update = PolicyUpdate(self.ds_engine, self.method.loss, self.objective,
                                   self.settings, self.pad_id, self.ranks, self.device, ref_model=ref_model)
        if self.rollout_engine is None:
            from rlvr.rollout.vllm_engine import RolloutEngine

            self.rollout_engine = RolloutEngine.from_params(self.model_path, self.params.engine,
                                                            self.params.model.dtype, seed=rollout_seed,
                                                            sleep_mode=True)
        self.verifier = Verifier.from_params(self.params, half="train")
        self.collector = RolloutCollector(self.rollout_engine, self.verifier, self.tokenizer, self.prompt,
                                          self.settings, self.sampler, self.ranks)
        return self._resume(state)

    def _resume(self, state: dict | None) -> int:
        if state is None:
            self.outputs.truncate_steps(0)
            return 0
        state = checkpoint.load(self.ds_engine, self.ckpt_dir, self.ranks)
        self.sampler.position = state["data_position"]
        self.anchor = state.get("entropy_anchor")
        self.best = state.get("best")
        self.saved_step = state["step"]
        self.outputs.prune_snapshots(self.best)
        self.outputs.truncate_steps(state["step"])
        self.tracker.drop_steps_after(state["step"])  # MLflow too holds each step once: the rest is redone
        self.push_weights()
        self._say(f"resumed from step {state['step']}")
        return state["step"]

    def _save(self, step: int | None) -> None:
        """A checkpoint of `step` (None: the last recorded one) with the trainer's state. Collective."""
        step = step if step is not None else self.outputs.last_step()
        self.outputs.save_checkpoint(self.ds_engine, {
            "step": step, "data_position": self.sampler.position, "entropy_anchor": self.anchor,
            "params_hash": self.hash, "identity": self.identity, "method": self.method.name, "world": self.ranks.world,
            "best": self.best, "tracking_run_id": self.tracker.run_id})
        self.saved_step = step

    def _say(self, text: str) -> None:
        if self.ranks.main:
            print(f"[train@{self.method.name}] {text}", flush=True)

    def train(self) -> list[dict]:
        """Every step; failing before its first checkpoint, a fresh start gives back what it set
        aside. A stop asked for at any moment from here on (setup included) ends at a safe point."""
        try:
            with self.stop:
                return self._train()
        except BaseException:
            if self.lock.held and self.ranks.main and resume.restore_aside(*self.outputs.set_aside):
                self._say(f"the checkpoint set aside is back in {self.ckpt_dir}")
            raise
        finally:
            self.lock.release()

    def _train(self) -> list[dict]:
        start = self.setup()
        steps, every = self.settings.steps, self.settings.eval_every
        rows = []
        try:
            bar = tqdm(range(start, steps), initial=start, total=steps, desc=f"train {self.method.name}",
                       disable=not self.ranks.main)
            if distributed.any_rank(self.stop.requested):  # asked for during the setup
                raise TrainingStopped(f"stopped by {self._stop_cause()} before step {start + 1}; {self._held()}; "
                                      "rerun to resume")
            for step in bar:
                row = self._step_or_stop(step)
                rows.append(row)
                bar.set_postfix(reward=f"{row['reward_mean']:.3f}", kl=f"{row['kl']:.2e}",
                                s=f"{row['time_total']:.0f}")
                done = step + 1
                improved = every > 0 and (done % every == 0 or done == steps) and self.validate(done, row)
                self.outputs.record(row, self.last_groups)
                # Every rank must stop at the same step, whichever got the signal.
                stop = distributed.any_rank(self.stop.requested or done == self.stop_after)
                if (improved or self.snapshots.kept(done)) and done < steps:
                    self.outputs.save_snapshot(self.ds_engine, done)  # before the checkpoint: a resumed run never lacks it
                if done % self.settings.checkpoint_every == 0 or done == steps or stop:
                    self._save(done)
                    self.outputs.prune_snapshots(self.best)
                if stop:
                    raise TrainingStopped(f"stopped by {self._stop_cause()} after step {done}, checkpointed; "
                                          "rerun to resume")
            self.outputs.save_final(self.ds_engine, self.best, self.settings.steps)
        finally:
            self.verifier.close()
        return rows

    def _step_or_stop(self, step: int) -> dict:
        """`step`, or, when a stop comes before its update, the run as it was
        before the step (generators and data position back, so a resumed run
        draws what this one would have) checkpointed, then TrainingStopped."""
        generators, position = checkpoint.rng_state(), self.sampler.position
        try:
            return self.step(step)
        except StepAbandoned as abandoned:
            checkpoint.set_rng_state(generators)
            self.sampler.position = position
            if step > self.saved_step:
                self._save(step)
            dropped = f"during the rollout of step {step + 1}: the step was dropped before its update; {self._held()}"
            if abandoned.args:  # the grading failed (on this rank: its cause; else on another)
                raise TrainingFailed(f"grading failed {dropped}; {abandoned.args[0] or 'see the rank that failed'}; "
                                     "rerun to resume once the grader works (verifier:)") from None
            raise TrainingStopped(f"stopped by {self._stop_cause()} {dropped}; rerun to resume") from None

    def _held(self) -> str:  # what a stop leaves
        return f"the checkpoint holds step {self.saved_step}" if self.saved_step else "no step was complete"

    def _stop_cause(self) -> str:
        if self.stop.requested:
            return self.stop.name
        return "request" if self.stop_after else "a signal to another rank"

    def request_stop(self, after_step: int | None = None) -> None:
        """Stop as a SIGTERM does, or once step `after_step` is checkpointed (TrainingStopped)."""
        if after_step is None:
            self.stop.request(signal.SIGTERM)
        self.stop_after = after_step

    def step(self, step: int, groups: list[Group] | None = None) -> dict:
        """One rollout step. `groups` (this rank's share, already graded) skips
        the rollout: tests and benchmarks drive the update with them."""
        timer, metrics, memory = PhaseTimer(), StepMetrics(), PhaseMemory(self.device)
        t0 = time.perf_counter()
        failed = None
        try:
            collected = self.collector.collect(timer) if groups is None else Collected(groups, 0, 0)
        except GradingFailed as e:
            failed = str(e)
        if distributed.any_rank(failed is not None):  # every rank drops the step together
            raise StepAbandoned(failed)
        if groups is None and distributed.any_rank(self.stop.requested):
            raise StepAbandoned  # nothing changed yet but the generators and the data position
        memory.rollout_done()
        lr = warmup_lr(step, self.settings.lr, self.settings.warmup_steps)
        for g in self.ds_engine.optimizer.param_groups:
            g["lr"] = lr
        self.rollout_engine.sleep()  # frees the GPU memory vLLM holds (KV cache, weights) for the update
        groups = training_groups(collected.groups, self.settings, self.ranks)
        memory.update_starts()
        self.anchor = self.update.run(groups, self.sampler.position, self.anchor, metrics, timer)
        memory.update_done()
        metrics.maxima.update(memory.gib)
        with timer("weight_push"):
            self.push_weights()  # wakes the engine with the new weights
        metrics.add_groups(collected.groups)
        self.last_groups = collected.groups  # this rank's, for the completions table
        metrics.totals.update(rollout_tokens=collected.rollout_tokens, rollout_rounds=collected.rounds)
        metrics.maxima.update({f"time_{p}": timer.seconds[p] for p in PHASES})
        metrics.maxima["time_total"] = time.perf_counter() - t0
        row = {"step": step + 1, **metrics.reduce(), "lr": lr}
        if self.anchor is not None:
            row["entropy_anchor"] = self.anchor
        self._check_bad_steps(row.pop("skipped_step", 0.0) > 0)
        return row

    def _check_bad_steps(self, bad: bool) -> None:  # `bad` is reduced over ranks: every rank stops together
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
            from rlvr.evaluation.evaluator import Evaluator

            self.validator = Evaluator.validation(self.params, self.model_path, self.rollout_engine, self.prompt)
        row.update(self.validator.validation_columns(f"validate step {step}"))
        score = distributed.all_sum([row.get("val_avg@k", 0.0) if self.ranks.main else 0.0])[0]  # rank 0's
        if self.best is not None and score <= self.best["score"]:
            return False
        self.best = {"step": step, "score": score}
        return True

    def push_weights(self) -> None:
        """This rank's weights into its rollout engine (waking it if asleep)."""
        with full_weights(self.ds_engine, self.settings.zero_stage) as weights:
            self.rollout_engine.load_weights(weights)
