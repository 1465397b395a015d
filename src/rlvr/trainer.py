"""The RL loop: vLLM rollouts -> verifier rewards -> DeepSpeed updates -> weight push.

One rollout step:
  1. sample B questions; n responses each from the in-process vLLM engine (pi_old)
  2. rewards from the verifier pool (DAPO: overlong shaping, dynamic sampling)
  3. pi_old's log-probs from the training model: a no-grad pass for every
     mini-batch but the first, which takes them from its own update forward
  4. epochs x mini-batches of questions; each mini-batch is split into
     micro-batches that hold whole groups (all n responses of a question in
     one loss call); DeepSpeed accumulates and steps once per mini-batch
  5. the new weights pushed into the running vLLM engine in place
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import random
import signal
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from rlvr import checkpoint
from rlvr.config import MethodConfig, Params
from rlvr.data.prompts import build_prompt
from rlvr.data.records import Record, read_records
from rlvr.objectives import NEEDS
from rlvr.objectives.base import PolicyBatch
from rlvr.objectives.registry import OBJECTIVES
from rlvr.objectives.base import policy_kl, token_mean, zero_variance_share
from rlvr.objectives.grpo import overlong_penalty
from rlvr.objectives.siren import anchor_value
from rlvr.policy import ENTROPIES, evaluate_tokens, pack
from rlvr.rewards import Verifier


class TrainingStopped(RuntimeError):
    pass


@dataclass
class Group:
    """One question and its n sampled responses."""

    record: Record
    prompt_ids: list[int]
    responses: list[list[int]]
    truncated: list[bool]
    rewards: list[float]  # shaped rewards the objective sees
    correct: list[bool]  # verifier result
    old_logp: list[torch.Tensor] | None = None


class QuestionSampler:
    """Seeded pass over the training set, reshuffled each epoch; its position is checkpointed."""

    def __init__(self, records: list[Record], seed: int, position: int = 0):
        self.records, self.seed, self.position = records, seed, position

    def _order(self, epoch: int) -> list[int]:
        idx = list(range(len(self.records)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(idx)
        return idx

    def next(self, k: int) -> list[Record]:
        out = []
        for _ in range(k):
            epoch, i = divmod(self.position, len(self.records))
            out.append(self.records[self._order(epoch)[i]])
            self.position += 1
        return out


class EntropyMeter:
    """pi_old's entropies over a step's response tokens (token-weighted means),
    and on SIREN's first step the top-p entropies its anchor is computed from."""

    def __init__(self, keep_for_anchor: bool = False):
        self.keep_for_anchor = keep_for_anchor
        self.sums = defaultdict(float)
        self.kept: list[tuple[torch.Tensor, torch.Tensor]] = []

    def add(self, out: dict[str, torch.Tensor], mask: torch.Tensor) -> None:
        for name in ENTROPIES:
            self.sums[name] += (out[name].detach() * mask).sum().item()
        self.sums["tokens"] += mask.sum().item()
        if self.keep_for_anchor:
            self.kept.append((out["topp_entropy"].detach(), mask))

    def anchor(self, quantile: float) -> float:
        """Over all kept rollouts: the response-weighted mean of per-micro-batch aggregates."""
        rows = sum(h.shape[0] for h, _ in self.kept)
        return sum(anchor_value(h, m, quantile) * h.shape[0] for h, m in self.kept) / rows

    def means(self) -> dict[str, float]:
        tokens = max(self.sums["tokens"], 1)
        return {name: self.sums[name] / tokens for name in ENTROPIES}


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


def init_distributed() -> None:
    """Single-process defaults so `python stages/train.py` works without a launcher."""
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(29500 + os.getpid() % 1000), "RANK": "0",
                 "LOCAL_RANK": "0", "WORLD_SIZE": "1"}.items():
        os.environ.setdefault(k, v)
    import deepspeed

    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")


def deepspeed_config(t, grad_accum: int) -> dict:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cfg = {
        "train_micro_batch_size_per_gpu": 1,  # one micro-batch = whole groups, sized by the trainer
        "gradient_accumulation_steps": grad_accum,
        "train_batch_size": grad_accum * world,
        "gradient_clipping": t.grad_clip,
        "zero_optimization": {"stage": t.zero_stage},
        "bf16": {"enabled": t.bf16},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    if t.warmup_steps > 0:
        cfg["scheduler"] = {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": t.lr,
                                                            "warmup_num_steps": t.warmup_steps}}
    return cfg


def adamw(model, t) -> torch.optim.AdamW:
    """AdamW with torch's fused kernel (CPU and CUDA): one pass over the
    parameters instead of a dozen, ~7x faster per step on CPU. DeepSpeed's
    ZeRO/bf16 wrapper re-points it at its float32 master partitions."""
    return torch.optim.AdamW(model.parameters(), lr=t.lr, betas=(0.9, 0.999), weight_decay=t.weight_decay,
                             fused=True)


class Trainer:
    def __init__(self, params: Params, method: MethodConfig, model_path: str, run_dir: str | Path,
                 final_dir: str | Path, tracker=None, engine=None):
        self.params, self.method, self.t, self.hp = params, method, method.train, method.objective
        self.model_path, self.run_dir, self.final_dir = str(model_path), Path(run_dir), Path(final_dir)
        self.ckpt_dir = self.run_dir / "checkpoint"
        self.steps_file = self.run_dir / "steps.csv"
        self.tracker = tracker
        self.loss_fn = OBJECTIVES[self.hp.objective]
        self.needs = NEEDS.get(self.hp.objective, set())
        self.hash = checkpoint.params_hash(dataclasses.asdict(self.t), dataclasses.asdict(self.hp),
                                           self.model_path, dataclasses.asdict(params.data))
        self.anchor: float | None = None
        self.bad_in_a_row = 0
        self._stop_signal = None
        self._rollout_engine = engine

    # ---- set-up -------------------------------------------------------------

    def setup(self) -> int:
        """Build engines; resume from the checkpoint if it matches. Returns the next step."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        import deepspeed

        torch.manual_seed(self.t.seed)
        random.seed(self.t.seed)
        records = read_records(Path(self.params.data.out_dir) / "train.jsonl")
        self.sampler = QuestionSampler(records, self.t.seed)
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
        init_distributed()
        grad_accum = self.t.mini_batch_questions // self.t.micro_batch_questions
        self.engine, *_ = deepspeed.initialize(model=model, optimizer=adamw(model, self.t),
                                               config=deepspeed_config(self.t, grad_accum))
        if self._rollout_engine is None:
            from rlvr.rollout import RolloutEngine

            self._rollout_engine = RolloutEngine.from_params(self.model_path, self.params.engine, self.params.model.dtype)
        self.verifier = Verifier(self.params.verifier.workers, self.params.verifier.timeout_s,
                                 self.params.verifier.group_timeout_s)
        return self._resume()

    def _resume(self) -> int:
        state = checkpoint.read_state(self.ckpt_dir)
        if state is None:
            self._truncate_steps(0)
            return 0
        if state.get("params_hash") != self.hash:
            print(f"[train@{self.method.name}] checkpoint at step {state.get('step')} was made with other "
                  "training params: starting fresh", flush=True)
            checkpoint.discard(self.ckpt_dir)
            self._truncate_steps(0)
            return 0
        state = checkpoint.load(self.engine, self.ckpt_dir)
        self.sampler.position = state["data_position"]
        self.anchor = state.get("entropy_anchor")
        self._truncate_steps(state["step"])
        self._push_weights()
        print(f"[train@{self.method.name}] resumed from step {state['step']}", flush=True)
        return state["step"]

    # ---- the loop -------------------------------------------------------------

    def train(self) -> list[dict]:
        start = self.setup()
        previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        rows = []
        try:
            bar = tqdm(range(start, self.t.steps), initial=start, total=self.t.steps, desc=f"train {self.method.name}")
            for step in bar:
                row = self.step(step)
                rows.append(row)
                self._record(row)
                bar.set_postfix(reward=f"{row['reward_mean']:.3f}", kl=f"{row['kl']:.2e}", s=f"{row['time_total']:.0f}")
                done = step + 1
                if done % self.t.checkpoint_every == 0 or done == self.t.steps or self._stop_signal:
                    self._save(done)
                if self._stop_signal:
                    raise TrainingStopped(f"stopped by signal {self._stop_signal} after step {done}; "
                                          "rerun to resume from the checkpoint")
            self._save_final()
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.verifier.close()
        return rows

    def _on_sigterm(self, signum, frame):
        self._stop_signal = signum  # finish the step, checkpoint, then stop

    def step(self, step: int) -> dict:
        timer = PhaseTimer()
        t0 = time.perf_counter()
        groups, n_rollout_tokens = self._collect(timer)
        orders = self._epoch_orders(groups)
        meter = EntropyMeter(keep_for_anchor=self._anchor_pending)
        with timer("old_logprobs"):
            self._old_logprobs(self._need_old_pass(groups, orders[0]), meter)
        with timer("update"):
            upd = self._update(orders, meter)
        stats = meter.means()
        with timer("weight_push"):
            self._push_weights()
        total = time.perf_counter() - t0
        return self._metrics(step, groups, stats, upd, timer, total, n_rollout_tokens)

    # ---- rollout and reward -------------------------------------------------------

    def _collect(self, timer: PhaseTimer) -> tuple[list[Group], int]:
        """B groups; with DAPO's dynamic sampling, all-equal groups are dropped
        and the batch refilled from new questions (a few rounds at most)."""
        B, kept, tokens = self.t.questions_per_step, [], 0
        rounds = 1 + (self.hp.dynamic_sampling_rounds if self.hp.dynamic_sampling else 0)
        for r in range(rounds):
            need = B - len(kept)
            groups, n_tok = self._rollout(self.sampler.next(need), timer)
            tokens += n_tok
            if self.hp.dynamic_sampling:
                informative = [g for g in groups if len(set(g.rewards)) > 1]
                kept += informative
                leftover = [g for g in groups if len(set(g.rewards)) == 1]
                if len(kept) >= B or r == rounds - 1:
                    kept = (kept + leftover)[:B]  # still short: fill with the last all-equal groups
                    break
            else:
                kept = groups
                break
        return kept, tokens

    def _rollout(self, records: list[Record], timer: PhaseTimer) -> tuple[list[Group], int]:
        with timer("rollout"):
            prompts = [build_prompt(r.problem, self.tokenizer) for r in records]
            outs = self._rollout_engine.generate(prompts, n=self.t.responses_per_question,
                                                 temperature=self.t.temperature, top_p=self.t.top_p,
                                                 max_tokens=self.t.max_response_tokens, progress=False)
        with timer("reward"):
            grades = self.verifier.grade([(r.golds, [c.text for c in cs]) for r, cs in zip(records, outs)])
        groups, tokens = [], 0
        for rec, comps, g in zip(records, outs, grades):
            correct = [it.correct for it in g.items]
            rewards = torch.tensor(correct, dtype=torch.float32)
            if self.hp.overlong_buffer > 0:
                lengths = torch.tensor([len(c.token_ids) for c in comps])
                rewards = rewards + overlong_penalty(lengths, self.t.max_response_tokens, self.hp.overlong_buffer)
            groups.append(Group(rec, comps[0].prompt_token_ids, [c.token_ids for c in comps],
                                [c.truncated for c in comps], rewards.tolist(), correct))
            tokens += sum(len(c.token_ids) for c in comps)
        return groups, tokens

    # ---- log-probs and updates -----------------------------------------------

    def _micro_batches(self, groups: list[Group]):
        m = self.t.micro_batch_questions
        return [groups[i : i + m] for i in range(0, len(groups), m)]

    def _packed(self, groups: list[Group]):
        prompts = [g.prompt_ids for g in groups for _ in g.responses]
        responses = [r for g in groups for r in g.responses]
        return pack(prompts, responses, self.pad_id, group_size=self.t.responses_per_question)

    def _epoch_orders(self, groups: list[Group]) -> list[list[Group]]:
        """The order groups go through the update in, one shuffle per epoch."""
        rng = random.Random(self.t.seed + self.sampler.position)
        orders = []
        for _ in range(self.t.epochs_per_step):
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
        on_policy = {id(g) for g in first_order[: self.t.mini_batch_questions]}
        return [g for g in groups if id(g) not in on_policy]

    @torch.no_grad()
    def _old_logprobs(self, groups: list[Group], meter: EntropyMeter) -> None:
        """pi_old's log-probs of `groups`, and their entropies into `meter`."""
        for micro in self._micro_batches(groups):
            packed = self._packed(micro)
            out = evaluate_tokens(self.engine.module, packed, self.t.temperature, entropies=ENTROPIES,
                                  topp=self._topp)
            meter.add(out, packed.response_mask)
            _keep_old_logp(micro, out["logp"])
        if meter.keep_for_anchor and meter.kept:
            self.anchor = meter.anchor(self.hp.peak_quantile)

    @property
    def _anchor_pending(self) -> bool:
        """SIREN before its first step: the anchor comes from this step's rollouts."""
        return "topp_entropy" in self.needs and self.anchor is None

    @property
    def _topp(self) -> dict:
        return {"top_p": self.hp.entropy_top_p, "top_k": self.hp.entropy_top_k}

    def _policy_batch(self, micro: list[Group], packed, out) -> PolicyBatch:
        t = packed.response_ids.shape[1]
        old = torch.zeros_like(out["logp"])
        i = 0
        for g in micro:
            for lp in g.old_logp:
                old[i, : lp.numel()] = lp
                i += 1
        ref = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref = evaluate_tokens(self.ref_model, packed, self.t.temperature)["logp"]
        return PolicyBatch(
            logp=out["logp"], old_logp=old, mask=packed.response_mask,
            rewards=torch.tensor([r for g in micro for r in g.rewards]),
            group_size=self.t.responses_per_question, max_response_len=max(self.t.max_response_tokens, t),
            ref_logp=ref, entropy=out.get("entropy"), topp_entropy=out.get("topp_entropy"),
            entropy_anchor=self.anchor,
        )

    def _update(self, orders: list[list[Group]], meter: EntropyMeter) -> dict:
        """epochs x mini-batches; DeepSpeed steps the optimizer at each mini-batch boundary."""
        model = self.engine.module
        sums, count, skipped, tokens = defaultdict(float), 0, 0, 0
        micro_per_update = self.t.mini_batch_questions // self.t.micro_batch_questions
        for order in orders:
            for micro in self._micro_batches(order):
                packed = self._packed(micro)
                on_policy = micro[0].old_logp is None  # pi_theta is still pi_old: measure it here
                if on_policy and count >= micro_per_update:
                    raise RuntimeError("old log-probs missing after an optimizer step")
                out = evaluate_tokens(model, packed, self.t.temperature,
                                      entropies=ENTROPIES if on_policy else self.needs,
                                      grad_entropies=self.needs, topp=self._topp)
                if on_policy:
                    meter.add(out, packed.response_mask)
                    _keep_old_logp(micro, out["logp"])
                batch = self._policy_batch(micro, packed, out)
                result = self.loss_fn(batch, self.hp)
                tokens += int(packed.attention_mask.sum())
                if torch.isfinite(result.loss):
                    self.engine.backward(result.loss)
                else:
                    # A non-finite loss never reaches the weights: back-propagate an
                    # exact zero instead, so DeepSpeed's accumulation stays consistent.
                    skipped += 1
                    self.engine.backward(sum(p.sum() for p in model.parameters()) * 0.0)
                self.engine.step()
                with torch.no_grad():
                    sums["kl"] += policy_kl(batch.logp, batch.old_logp, batch.mask).item()
                    sums["loss"] += result.loss.item()
                for k, v in result.metrics.items():
                    sums[k] += v
                count += 1
        self.bad_in_a_row = self.bad_in_a_row + 1 if skipped else 0
        if self.bad_in_a_row >= self.t.max_bad_steps:
            self._save(None)
            raise TrainingStopped(f"{self.bad_in_a_row} steps in a row had non-finite losses; "
                                  "lower train.lr or check the data; a checkpoint was saved")
        out = {k: v / max(count, 1) for k, v in sums.items()}
        out.update(skipped_updates=skipped, train_tokens=tokens)
        return out

    def _push_weights(self) -> None:
        module = self.engine.module
        if self.t.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(module.parameters())):
                self._rollout_engine.load_weights((n, p.detach().clone()) for n, p in module.state_dict().items())
        else:
            self._rollout_engine.load_weights((n, p.detach()) for n, p in module.state_dict().items())

    # ---- metrics and outputs ------------------------------------------------------

    def _metrics(self, step, groups, stats, upd, timer, total, n_rollout_tokens) -> dict:
        correct = [c for g in groups for c in g.correct]
        lengths = [len(r) for g in groups for r in g.responses]
        truncated = [t for g in groups for t in g.truncated]
        rewards = torch.tensor([r for g in groups for r in g.rewards])
        row = {
            "step": step + 1,
            "reward_mean": rewards.mean().item(),
            "accuracy": sum(correct) / len(correct),
            "entropy": stats["entropy"],
            "topp_entropy": stats["topp_entropy"],
            "kl": upd.get("kl", 0.0),
            "loss": upd.get("loss", 0.0),
            "clip_frac": upd.get("clip_frac", 0.0),
            "zero_variance_groups": zero_variance_share(torch.tensor([c for g in groups for c in g.correct],
                                                                     dtype=torch.float32),
                                                        self.t.responses_per_question),
            "response_length": sum(lengths) / len(lengths),
            "truncation_rate": sum(truncated) / len(truncated),
            "skipped_updates": upd.get("skipped_updates", 0),
            "rollout_tokens_per_s": n_rollout_tokens / max(timer.seconds["rollout"], 1e-9),
            "train_tokens_per_s": upd.get("train_tokens", 0) / max(timer.seconds["update"], 1e-9),
            "time_total": total,
        }
        for phase in ("rollout", "reward", "old_logprobs", "update", "weight_push"):
            row[f"time_{phase}"] = timer.seconds[phase]
        by_level = defaultdict(list)
        for g in groups:
            by_level[g.record.level].extend(g.correct)
        for lv in sorted(k for k in by_level if k is not None):
            row[f"accuracy_L{lv}"] = sum(by_level[lv]) / len(by_level[lv])
        for k in ("siren_entropy", "siren_reg", "disco_j", "kl_penalty"):
            if k in upd:
                row[k] = upd[k]
        return row

    def _record(self, row: dict) -> None:
        """Append to steps.csv (rewritten atomically) and MLflow."""
        rows = _read_csv(self.steps_file) + [row]
        _write_csv(self.steps_file, rows)
        if self.tracker is not None:
            self.tracker.log_metrics({k: v for k, v in row.items() if k != "step"}, step=row["step"])

    def history(self) -> list[dict[str, float]]:
        """Every recorded step of this run, resumed ones included, as numbers."""
        number = lambda k, v: int(float(v)) if k == "step" else float(v)  # noqa: E731
        return [{k: number(k, v) for k, v in r.items() if v not in ("", None)} for r in _read_csv(self.steps_file)]

    def _truncate_steps(self, last_step: int) -> None:
        rows = [r for r in _read_csv(self.steps_file) if int(float(r["step"])) <= last_step]
        if rows or self.steps_file.exists():
            _write_csv(self.steps_file, rows)

    def _save(self, step: int | None) -> None:
        step = step if step is not None else self._last_step()
        checkpoint.save(self.engine, self.ckpt_dir, {
            "step": step, "data_position": self.sampler.position, "entropy_anchor": self.anchor,
            "params_hash": self.hash, "method": self.method.name,
        })

    def _last_step(self) -> int:
        rows = _read_csv(self.steps_file)
        return int(float(rows[-1]["step"])) if rows else 0

    def _save_final(self) -> None:
        """The trained weights as a plain HF checkpoint for evaluation."""
        from rlvr.model import save_checkpoint

        save_checkpoint(self.engine.module, self.tokenizer, self.final_dir)


def _read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) and math.isfinite(v) else v) for k, v in r.items()})
    os.replace(tmp, path)
