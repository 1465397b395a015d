"""The RL loop: vLLM rollouts -> verifier rewards -> DeepSpeed updates -> weight push.

One rollout step, on every rank of a data-parallel job (one rank without a launcher):
  1. this rank's share of the step's B questions, n responses each from its
     own vLLM engine (pi_old), graded and shaped (rlvr.groups)
  2. pi_old's log-probs from the training model: a no-grad pass for every
     mini-batch but the first, which takes them from its own update forward
  3. epochs x mini-batches; each rank holds its share of every mini-batch,
     split into micro-batches of whole groups (all n responses of a question
     in one loss call); DeepSpeed averages the gradients of all loss calls of
     all ranks and steps the optimizer once per mini-batch
  4. the new weights pushed into this rank's vLLM engine in place
  5. metrics reduced over ranks (rlvr.step_metrics); rank 0 writes them

Rank 0 alone writes steps.csv, MLflow, snapshots and the final model;
checkpoints are collective.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
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
from rlvr.atomic import atomic_file, write_json
from rlvr.config import MethodConfig, Params, settings_hash
from rlvr.data.records import read_records
from rlvr.groups import Collected, Group, QuestionSampler, RolloutCollector
from rlvr.objectives import NEEDS, NEEDS_GRAD
from rlvr.objectives.base import PolicyBatch, policy_kl
from rlvr.objectives.registry import OBJECTIVES
from rlvr.objectives.siren import anchor_value
from rlvr.policy import ENTROPIES, evaluate_tokens, pack
from rlvr.rewards import Verifier
from rlvr.step_metrics import PHASES, StepMetrics

SNAPSHOTS = "snapshots.json"  # in the final model's directory: the kept snapshots and their identities
SNAPSHOT_ID = "snapshot.json"  # in each snapshot: which run and step it is


class TrainingStopped(RuntimeError):
    pass


class EntropyMeter:
    """pi_old's entropies over a step's response tokens (sums for token-weighted
    means), and on SIREN's first step the top-p entropies its anchor comes from."""

    def __init__(self, keep_for_anchor: bool = False):
        self.keep_for_anchor = keep_for_anchor
        self.sums = defaultdict(float)
        self.tokens = 0.0
        self.kept: list[tuple[torch.Tensor, torch.Tensor]] = []

    def add(self, out: dict[str, torch.Tensor], mask: torch.Tensor) -> None:
        for name in ENTROPIES:
            self.sums[name] += (out[name].detach() * mask).sum().item()
        self.tokens += mask.sum().item()
        if self.keep_for_anchor:
            self.kept.append((out["topp_entropy"].detach(), mask))

    def anchor(self, quantile: float) -> float:
        """Over every rollout of the step on every rank: the response-weighted
        mean of the per-micro-batch aggregates."""
        weighted = sum(anchor_value(h, m, quantile) * h.shape[0] for h, m in self.kept)
        rows = sum(h.shape[0] for h, _ in self.kept)
        weighted, rows = distributed.all_sum([weighted, float(rows)])
        return weighted / rows


def _keep_old_logp(micro: list[Group], logp: torch.Tensor) -> None:
    """Store each response's pi_old log-probs (rows of `logp` in micro-batch order)."""
    rows = iter(logp.detach())
    for g in micro:
        g.old_logp = [next(rows)[: len(r)].clone() for r in g.responses]


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


def deepspeed_config(t, grad_accum: int, world: int) -> dict:
    return {
        "train_micro_batch_size_per_gpu": 1,  # one micro-batch = whole groups, sized by the trainer
        "gradient_accumulation_steps": grad_accum,
        "train_batch_size": grad_accum * world,
        "gradient_clipping": t.grad_clip,
        "zero_optimization": {"stage": t.zero_stage},
        "bf16": {"enabled": t.bf16},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def adamw(model, t) -> torch.optim.AdamW:
    """AdamW with torch's fused kernel (CPU and CUDA): one pass over the
    parameters instead of a dozen, ~7x faster per step on CPU. DeepSpeed's
    ZeRO/bf16 wrapper re-points it at its float32 master partitions."""
    return torch.optim.AdamW(model.parameters(), lr=t.lr, betas=(0.9, 0.999), weight_decay=t.weight_decay,
                             fused=True)


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


class Trainer:
    def __init__(self, params: Params, method: MethodConfig, model_path: str, run_dir: str | Path,
                 final_dir: str | Path, tracker=None, vllm=None, steps_file: str | Path | None = None):
        self.params, self.method, self.t, self.hp = params, method, method.train, method.objective
        self.model_path, self.run_dir, self.final_dir = str(model_path), Path(run_dir), Path(final_dir)
        self.ckpt_dir = self.run_dir / "checkpoint"
        self.snapshot_root = self.run_dir / "snapshots"
        self.steps_file = Path(steps_file) if steps_file else self.run_dir / "steps.csv"
        self.tracker = tracker
        self.loss_fn = OBJECTIVES[self.hp.objective]
        self.needs = NEEDS.get(self.hp.objective, set())
        self.grad_needs = NEEDS_GRAD.get(self.hp.objective, set())
        self.ranks = distributed.ranks_from_env()
        self.anchor: float | None = None
        self.bad_in_a_row = 0
        self._stop_signal = None
        self.vllm = vllm

    # ---- set-up -------------------------------------------------------------

    def setup(self) -> int:
        """Build the engines; resume from the checkpoint if it matches. Returns the next step."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        import deepspeed

        self.ranks = distributed.init(self.params.launcher.timeout_s)
        self._share_cpu()
        # vLLM runs in-process and samples from the global torch generator, so
        # the global seed is the rank's rollout seed: one seed would make every
        # rank draw the same responses.
        rollout_seed = self.params.engine.seed + 1000 * self.t.seed + self.ranks.rank
        torch.manual_seed(rollout_seed)
        random.seed(rollout_seed)
        train_file = self.params.data.train_dir / "train.jsonl"
        self.sampler = QuestionSampler(read_records(train_file), self.t.seed)
        self.hash = settings_hash(dataclasses.asdict(self.t), dataclasses.asdict(self.hp), self.model_path,
                                           file_digest(train_file), dataclasses.asdict(self.params.prompt),
                                           self.ranks.world)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        dtype = torch.bfloat16 if self.t.bf16 else torch.float32
        model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=dtype)
        if self.t.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        self.ref_model = None
        if self.hp.kl_coef > 0:
            self.ref_model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=dtype).eval()
            self.ref_model.requires_grad_(False)
        self.ds_engine, *_ = deepspeed.initialize(model=model, optimizer=adamw(model, self.t),
                                                  config=deepspeed_config(self.t, self.micro_per_update,
                                                                          self.ranks.world))
        if self.vllm is None:
            from rlvr.rollout import RolloutEngine

            self.vllm = RolloutEngine.from_params(self.model_path, self.params.engine, self.params.model.dtype,
                                                  seed=rollout_seed)
        self.verifier = Verifier.from_params(self.params)
        self.collector = RolloutCollector(self.vllm, self.verifier, self.tokenizer, self.params.prompt, self.t,
                                          self.hp, self.sampler, self.ranks)
        return self._resume()

    @property
    def micro_per_update(self) -> int:
        """Loss calls per optimizer step on one rank."""
        return self.t.mini_batch_questions // self.ranks.world // self.t.micro_batch_questions

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
                shutil.rmtree(self.snapshot_root, ignore_errors=True)
            self._truncate_steps(0)
            return 0
        state = checkpoint.load(self.ds_engine, self.ckpt_dir, self.ranks)
        self.sampler.position = state["data_position"]
        self.anchor = state.get("entropy_anchor")
        self._truncate_steps(state["step"])
        self._push_weights()
        self._say(f"resumed from step {state['step']}")
        return state["step"]

    def _say(self, text: str) -> None:
        if self.ranks.main:
            print(f"[train@{self.method.name}] {text}", flush=True)

    # ---- the loop -------------------------------------------------------------

    def train(self) -> list[dict]:
        start = self.setup()
        previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        rows = []
        try:
            bar = tqdm(range(start, self.t.steps), initial=start, total=self.t.steps, desc=f"train {self.method.name}",
                       disable=not self.ranks.main)
            for step in bar:
                row = self.step(step)
                rows.append(row)
                self._record(row)
                bar.set_postfix(reward=f"{row['reward_mean']:.3f}", kl=f"{row['kl']:.2e}", s=f"{row['time_total']:.0f}")
                done = step + 1
                # Every rank must stop at the same step, whichever got the signal.
                stop = distributed.any_rank(self._stop_signal is not None)
                if self.t.eval_every and done % self.t.eval_every == 0 and done < self.t.steps:
                    self._save_snapshot(done)  # before the checkpoint: a resumed run never lacks it
                if done % self.t.checkpoint_every == 0 or done == self.t.steps or stop:
                    self._save(done)
                if stop:
                    raise TrainingStopped(f"stopped by signal {self._stop_signal or 'on another rank'} after "
                                          f"step {done}; rerun to resume from the checkpoint")
            self._save_final()
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.verifier.close()
        return rows

    def _on_sigterm(self, signum, frame):
        self._stop_signal = signum  # finish the step, checkpoint, then stop

    def step(self, step: int, groups: list[Group] | None = None) -> dict:
        """One rollout step. `groups` (this rank's share, already graded) skips
        the rollout: tests and benchmarks drive the update with them."""
        timer, metrics = PhaseTimer(), StepMetrics()
        t0 = time.perf_counter()
        collected = self.collector.collect(timer) if groups is None else Collected(groups, 0, 0)
        lr = warmup_lr(step, self.t.lr, self.t.warmup_steps)
        for g in self.ds_engine.optimizer.param_groups:
            g["lr"] = lr
        orders = self._epoch_orders(collected.groups)
        meter = EntropyMeter(keep_for_anchor=self._anchor_pending)
        with timer("old_logprobs"):
            self._old_logprobs(self._need_old_pass(collected.groups, orders[0]), meter)
        with timer("update"):
            self._update(orders, meter, metrics)
        with timer("weight_push"):
            self._push_weights()
        metrics.add_groups(collected.groups)
        metrics.add_entropies(dict(meter.sums), meter.tokens)
        metrics.totals.update(rollout_tokens=collected.rollout_tokens, rollout_rounds=collected.rounds)
        metrics.maxima.update({f"time_{p}": timer.seconds[p] for p in PHASES})
        metrics.maxima["time_total"] = time.perf_counter() - t0
        row = {"step": step + 1, **metrics.reduce(), "lr": lr}
        if self.anchor is not None:
            row["entropy_anchor"] = self.anchor
        self._check_bad_steps(row.pop("skipped_step", 0.0) > 0)
        return row

    # ---- log-probs and updates -----------------------------------------------

    def _micro_batches(self, groups: list[Group]) -> list[list[Group]]:
        m = self.t.micro_batch_questions
        return [groups[i : i + m] for i in range(0, len(groups), m)]

    def _packed(self, groups: list[Group]):
        prompts = [g.prompt_ids for g in groups for _ in g.responses]
        responses = [r for g in groups for r in g.responses]
        return pack(prompts, responses, self.pad_id, group_size=self.t.responses_per_question)

    def _epoch_orders(self, groups: list[Group]) -> list[list[Group]]:
        """The order of this rank's groups in each epoch. The first epoch keeps
        the sampled order, so the ranks' mini-batches are the one-rank
        mini-batches split (rlvr.distributed.Ranks.share); later epochs
        reshuffle each rank's share."""
        rng = random.Random(self.t.seed + self.sampler.position + 7919 * self.ranks.rank)
        orders = [groups[:]]
        for _ in range(1, self.t.epochs_per_step):
            order = groups[:]
            rng.shuffle(order)
            orders.append(order)
        return orders

    def _need_old_pass(self, groups: list[Group], first_order: list[Group]) -> list[Group]:
        """Groups whose pi_old log-probs need a forward pass of their own.

        Until the first optimizer step the policy is pi_old, so the first
        mini-batch's old log-probs (and entropies) come from its own update
        forward. SIREN's first step is the exception: its anchor is over every
        rollout of the step and must exist before the first loss.
        """
        if self._anchor_pending:
            return groups
        on_policy = {id(g) for g in first_order[: self.t.mini_batch_questions // self.ranks.world]}
        return [g for g in groups if id(g) not in on_policy]

    @torch.no_grad()
    def _old_logprobs(self, groups: list[Group], meter: EntropyMeter) -> None:
        """pi_old's log-probs of `groups`, and their entropies into `meter`."""
        for micro in self._micro_batches(groups):
            packed = self._packed(micro)
            out = evaluate_tokens(self.ds_engine.module, packed, self.t.temperature, entropies=ENTROPIES,
                                  topp=self._topp)
            meter.add(out, packed.response_mask)
            _keep_old_logp(micro, out["logp"])
        if meter.keep_for_anchor:
            self.anchor = meter.anchor(self.hp.peak_quantile)

    @property
    def _anchor_pending(self) -> bool:
        """SIREN before its first step: the anchor comes from this step's rollouts."""
        return "topp_entropy" in self.needs and self.anchor is None

    @property
    def _topp(self) -> dict:
        return {"top_p": self.hp.entropy_top_p, "top_k": self.hp.entropy_top_k}

    def _policy_batch(self, micro: list[Group], packed, out, token_norm: float) -> PolicyBatch:
        old = torch.zeros_like(out["logp"])
        for i, lp in enumerate(lp for g in micro for lp in g.old_logp):
            old[i, : lp.numel()] = lp
        ref = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref = evaluate_tokens(self.ref_model, packed, self.t.temperature)["logp"]
        return PolicyBatch(
            logp=out["logp"], old_logp=old, mask=packed.response_mask,
            rewards=torch.tensor([r for g in micro for r in g.rewards]),
            group_size=self.t.responses_per_question,
            max_response_len=max(self.t.max_response_tokens, packed.response_ids.shape[1]),
            ref_logp=ref, entropy=out.get("entropy"), topp_entropy=out.get("topp_entropy"),
            entropy_anchor=self.anchor, token_norm=token_norm,
        )

    def _token_norms(self, mini_batches: list[list[list[Group]]]) -> list[float]:
        """Per optimizer step: real tokens of the whole mini-batch (all ranks)
        per loss call, the divisor of a token-level mean (DAPO)."""
        local = [float(sum(len(r) for micro in mb for g in micro for r in g.responses)) for mb in mini_batches]
        calls = self.micro_per_update * self.ranks.world
        return [max(n, 1.0) / calls for n in distributed.all_sum(local)]

    def _update(self, orders: list[list[Group]], meter: EntropyMeter, metrics: StepMetrics) -> None:
        """epochs x mini-batches; DeepSpeed steps the optimizer at each mini-batch boundary."""
        model = self.ds_engine.module
        per_update = self.micro_per_update
        mini_batches = [self._micro_batches(order)[i : i + per_update]
                        for order in orders for i in range(0, len(self._micro_batches(order)), per_update)]
        skipped, calls = 0, 0
        for mb, token_norm in zip(mini_batches, self._token_norms(mini_batches)):
            for micro in mb:
                packed = self._packed(micro)
                on_policy = micro[0].old_logp is None  # pi_theta is still pi_old: measure it here
                if on_policy and calls >= per_update:
                    raise RuntimeError("old log-probs missing after an optimizer step")
                out = evaluate_tokens(model, packed, self.t.temperature,
                                      entropies=ENTROPIES if on_policy else self.needs,
                                      grad_entropies=self.grad_needs, topp=self._topp)
                if on_policy:
                    meter.add(out, packed.response_mask)
                    _keep_old_logp(micro, out["logp"])
                batch = self._policy_batch(micro, packed, out, token_norm)
                result = self.loss_fn(batch, self.hp)
                metrics.totals["train_tokens"] += float(packed.attention_mask.sum())
                if torch.isfinite(result.loss):
                    self.ds_engine.backward(result.loss)
                else:
                    # A non-finite loss never reaches the weights: back-propagate an
                    # exact zero instead, so DeepSpeed's accumulation stays consistent.
                    skipped += 1
                    self.ds_engine.backward(sum(p.sum() for p in model.parameters()) * 0.0)
                self.ds_engine.step()
                with torch.no_grad():
                    kl = policy_kl(batch.logp, batch.old_logp, batch.mask).item()
                metrics.add_loss_call({"kl": kl, "loss": result.loss.item(), **result.metrics})
                calls += 1
        metrics.totals["skipped_updates"] += skipped
        metrics.maxima["skipped_step"] = float(skipped > 0)

    def _check_bad_steps(self, bad: bool) -> None:
        """`bad` is already reduced over ranks, so every rank stops together."""
        self.bad_in_a_row = self.bad_in_a_row + 1 if bad else 0
        if self.bad_in_a_row >= self.t.max_bad_steps:
            self._save(None)
            raise TrainingStopped(f"{self.bad_in_a_row} steps in a row had non-finite losses; "
                                  "lower train.lr or check the data; a checkpoint was saved")

    def _push_weights(self) -> None:
        with self._full_weights() as weights:
            self.vllm.load_weights(weights)

    @contextmanager
    def _full_weights(self):
        """This rank's full weights (ZeRO-3 gathers its partitions first)."""
        module = self.ds_engine.module
        if self.t.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(module.parameters())):
                yield [(n, p.detach().clone()) for n, p in module.state_dict().items()]
        else:
            yield ((n, p.detach()) for n, p in module.state_dict().items())

    # ---- outputs ------------------------------------------------------------------

    def _record(self, row: dict) -> None:
        """Append to steps.csv (rewritten atomically) and MLflow, on rank 0."""
        if not self.ranks.main:
            return
        _write_csv(self.steps_file, _read_csv(self.steps_file) + [row])
        if self.tracker is not None:
            self.tracker.log_metrics({k: v for k, v in row.items() if k != "step"}, step=row["step"])

    def history(self) -> list[dict[str, float]]:
        """Every recorded step of this run, resumed ones included, as numbers."""
        number = lambda k, v: int(float(v)) if k == "step" else float(v)  # noqa: E731
        return [{k: number(k, v) for k, v in r.items() if v not in ("", None)} for r in _read_csv(self.steps_file)]

    def _truncate_steps(self, last_step: int) -> None:
        if not self.ranks.main:
            return
        rows = [r for r in _read_csv(self.steps_file) if int(float(r["step"])) <= last_step]
        if rows or self.steps_file.exists():
            _write_csv(self.steps_file, rows)

    def _save(self, step: int | None) -> None:
        step = step if step is not None else self._last_step()
        checkpoint.save(self.ds_engine, self.ckpt_dir, {
            "step": step, "data_position": self.sampler.position, "entropy_anchor": self.anchor,
            "params_hash": self.hash, "method": self.method.name, "world": self.ranks.world,
        }, self.ranks)

    def _last_step(self) -> int:
        rows = _read_csv(self.steps_file) if self.ranks.main else []
        return int(distributed.all_sum([float(rows[-1]["step"]) if rows else 0.0])[0])

    def _save_hf(self, out_dir: Path) -> None:
        from rlvr.model import save_checkpoint

        with self._full_weights():  # ZeRO-3: every rank takes part in the gather
            if self.ranks.main:
                save_checkpoint(self.ds_engine.module, self.tokenizer, out_dir)
        distributed.barrier()

    def snapshot_id(self, step: int) -> str:
        """Names the weights of one step of this run: its params and the step."""
        return f"{self.hash}-{step}"

    def _snapshot_dir(self, step: int) -> Path:
        return self.snapshot_root / f"step_{step:06d}"

    def _save_snapshot(self, step: int) -> None:
        """An HF snapshot for periodic evaluation (runs/<run>/snapshots; linked
        into the final model's directory at the end), marked with its identity
        so a stale one is never taken for it."""
        self._save_hf(self._snapshot_dir(step))
        if self.ranks.main:
            write_json(self._snapshot_dir(step) / SNAPSHOT_ID, {"id": self.snapshot_id(step), "step": step})

    def _snapshot_ok(self, step: int) -> bool:
        marker = self._snapshot_dir(step) / SNAPSHOT_ID
        return marker.exists() and json.loads(marker.read_text())["id"] == self.snapshot_id(step)

    def _save_final(self) -> None:
        """The trained weights as a plain HF checkpoint, its snapshots beside
        it, and their list (what the evaluate stage evaluates besides it).

        The snapshots go into the model's output directory, so DVC caches and
        pushes them with it: a teammate who pulled can re-evaluate every
        checkpoint under new evaluation settings without retraining. They are
        hard links to runs/<run>/snapshots (kept there for resuming), so the
        copy costs no disk."""
        self._save_hf(self.final_dir)
        if not self.ranks.main:
            return
        steps = range(self.t.eval_every, self.t.steps, self.t.eval_every) if self.t.eval_every else []
        snapshots = []
        for s in (s for s in steps if self._snapshot_ok(s)):
            rel = Path("snapshots") / self._snapshot_dir(s).name
            _link_tree(self._snapshot_dir(s), self.final_dir / rel)
            snapshots.append({"step": s, "id": self.snapshot_id(s), "path": str(rel)})
        snapshots.append({"step": self.t.steps, "id": self.snapshot_id(self.t.steps), "path": "."})
        write_json(self.final_dir / SNAPSHOTS, snapshots)


def _link_tree(src: Path, dst: Path) -> None:
    """dst as a copy of src made of hard links (a plain copy across file systems)."""
    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=link)


def _read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _write_csv(path: Path, rows: list[dict]) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with atomic_file(path, newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) and math.isfinite(v) else v) for k, v in r.items()})
