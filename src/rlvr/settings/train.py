"""The training settings every method shares (`train:`, which a method's
entry may override key by key), their rules, and a method entry split into
them and its objective's settings."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rlvr.schema import AT_LEAST_0, AT_LEAST_1, FRACTION, POSITIVE, Range
from rlvr.settings.call_plan import CallPlan

if TYPE_CHECKING:  # the sections import TrainParams: only the type comes back
    from rlvr.settings.sections import Params


@dataclass
class TrainParams:
    """Shared by every method (`train:`); a method entry may override any key."""

    steps: int = 8  # rollout steps
    questions_per_step: int = 8  # B
    responses_per_question: int = 4  # n
    mini_batch_questions: int = 4  # questions per optimizer step; B / this = updates per rollout step
    micro_batch_questions: int = 2  # questions per loss call (all n responses of each), when max_tokens_per_call is 0
    max_tokens_per_call: int = 0  # > 0: loss calls are bins of at most this many tokens per GPU (rlvr.training.loss_calls)
    # > 0: every loss call holds this many responses per GPU, laid out so that the ranks' calls together
    # hold whole groups (DisCO's official 4: an objective that compares a group's responses gathers them)
    sequences_per_call: int = 0
    padding_free: bool = False  # a loss call's sequences in one row, no padding (rlvr.training.packing.pack_flat)
    epochs_per_step: int = 1  # passes over a step's rollouts (optimizer steps: this x B / mini-batch)
    max_response_tokens: int = 96  # the longest sampled response
    temperature: float = 1.0  # rollout sampling temperature
    top_p: float = 1.0  # rollout nucleus sampling
    lr: float = 1e-5  # AdamW's learning rate (after the warm-up)
    weight_decay: float = 0.0  # AdamW's weight decay
    warmup_steps: int = 0  # linear from 0 over this many rollout steps (verl's constant-with-warmup)
    grad_clip: float = 1.0  # gradient norm clip per optimizer step
    zero_stage: int = 2  # DeepSpeed ZeRO stage: 0 (none), 1, 2 (optimizer state and gradients sharded), 3 (weights too)
    bf16: bool = True  # train in bf16 with fp32 master weights (auto: where there are bf16 units)
    gradient_checkpointing: bool = False  # recompute each layer in the backward pass (less memory, ~1/3 more time)
    # the reference model's layers stay in CPU memory and visit the GPU one at a time during its pass (verl's
    # ref.fsdp_config.param_offload, set by DisCO's 7B script and TRPA's main_TRPA.sh); same numbers, less memory
    ref_offload: bool = False
    checkpoint_every: int = 2  # rollout steps between checkpoints (and at the last step)
    eval_every: int = 0  # validate every this many steps (and at the last); the best-on-validation checkpoint is kept
    # the paper's checkpoint protocol, opt-in (0 = off): a snapshot every this many steps, each scored on the
    # test sets, the best on them reported beside ours and marked optimistic (DisCO's save_freq: 200)
    snapshot_every: int = 0
    max_bad_steps: int = 3  # consecutive non-finite updates before the run stops
    seed: int = 0  # the run's seed (the train matrix sets it from `seeds`)
    # ---- the rollout side: the rewards the objective sees and which groups it trains on (rlvr.rollout.groups)
    incorrect_reward: float = 0.0  # reward of a wrong answer; DAPO: -1 (its reward is +1 / -1)
    overlong_buffer: int = 0  # DAPO's soft overlong punishment over the last this many tokens (0 = off)
    dynamic_sampling: bool = False  # DAPO: drop groups whose accuracies are all equal, refill from new questions
    dynamic_sampling_rounds: int = 3  # extra rollout rounds at most per step
    ranges: ClassVar[dict[str, Range]] = {
        "steps": AT_LEAST_1, "questions_per_step": AT_LEAST_1,
        "responses_per_question": Range(2),  # every objective compares the responses of a question
        "mini_batch_questions": AT_LEAST_1, "micro_batch_questions": AT_LEAST_1, "max_tokens_per_call": AT_LEAST_0,
        "sequences_per_call": AT_LEAST_0, "epochs_per_step": AT_LEAST_1, "max_response_tokens": AT_LEAST_1,
        "temperature": POSITIVE,  # RL samples: 0 (greedy) would give a group of equal responses
        "top_p": FRACTION, "lr": POSITIVE, "weight_decay": AT_LEAST_0, "warmup_steps": AT_LEAST_0,
        "grad_clip": POSITIVE, "zero_stage": Range(0, 3), "checkpoint_every": AT_LEAST_1, "eval_every": AT_LEAST_0,
        "max_bad_steps": AT_LEAST_1, "snapshot_every": AT_LEAST_0, "seed": AT_LEAST_0,
        "incorrect_reward": Range(-1, 1, high_open=True),  # below a right answer's 1 (DAPO's -1, DisCO's 0)
        "overlong_buffer": AT_LEAST_0, "dynamic_sampling_rounds": AT_LEAST_0,
    }

    @property
    def float32_gradients(self) -> bool:
        """Gradients accumulate over a mini-batch's loss calls and reduce over
        ranks in float32 (rlvr.training.deepspeed_engine), as verl keeps them: always, but for
        a bf16 model without ZeRO, where DeepSpeed refuses float32 accumulation."""
        return not self.bf16 or self.zero_stage > 0


def check_train(where: str, t: TrainParams, params: Params, problems: list[str]) -> None:
    """The rules among a method's training settings (`train:` with its
    overrides; each one's range: TrainParams.ranges); those that depend on
    its objective are in rlvr.settings.methods."""
    if t.mini_batch_questions >= 1 and t.questions_per_step % t.mini_batch_questions:
        problems.append(f"'train.mini_batch_questions' ({t.mini_batch_questions}) must divide "
                        f"'train.questions_per_step' ({t.questions_per_step})")
    if t.sequences_per_call > 0 and t.max_tokens_per_call > 0:
        problems.append(f"'{where}': train.sequences_per_call ({t.sequences_per_call}) and max_tokens_per_call "
                        f"({t.max_tokens_per_call}) both size the loss calls: set one, the other 0")
    check_rank_shares(where, t, params.launcher.world, problems)
    check_token_budget(where, t, params.engine.max_model_len, problems)
    if t.max_response_tokens >= params.engine.max_model_len:
        problems.append(f"'train.max_response_tokens' ({t.max_response_tokens}) must be below "
                        f"'engine.max_model_len' ({params.engine.max_model_len}), which must hold the prompt too")
    if t.eval_every and not params.data.validates:
        problems.append(f"'train.eval_every' ({t.eval_every}) validates on problems held out of the training "
                        "mixture: set data.validation_size (e.g. 128) or, training on arithmetic, "
                        "data.arithmetic.n_validation_per_level, or eval_every: 0")
    if t.overlong_buffer >= t.max_response_tokens:
        problems.append(f"'{where}.overlong_buffer' must be below train.max_response_tokens "
                        f"({t.max_response_tokens}), got {t.overlong_buffer}")


def check_rank_shares(where: str, t: TrainParams, world: int, problems: list[str], needs_groups: str = "") -> None:
    """Each rank takes an equal share of every mini-batch: whole questions, or,
    with token-budget calls and an objective that needs no whole group, an
    equal slice of its responses (CallPlan.shared).
    `needs_groups`: the objective that needs whole groups in every loss call
    (rlvr.settings.methods adds that rule; "" here, where objectives are unknown)."""
    m, n, ranks = t.mini_batch_questions, t.responses_per_question, f"the number of ranks ({world} = " \
        "launcher.procs_per_node x launcher.nodes)"
    if m < 1 or world < 1:
        return  # out of range: reported with its key
    if t.sequences_per_call > 0:
        rows = CallPlan(t, world, bool(needs_groups)).rows
        if (m * n) % (world * rows):
            whole = f" ({rows}: the calls of all ranks together hold whole groups of {needs_groups})" \
                if rows != t.sequences_per_call else ""
            problems.append(f"'{where}': a mini-batch's responses (mini_batch_questions x responses_per_question = "
                            f"{m * n}) must split into loss calls of {rows} responses{whole} on each of {ranks}")
        return
    if m % world == 0:
        if t.max_tokens_per_call <= 0 and (t.micro_batch_questions < 1 or (m // world) % t.micro_batch_questions):
            problems.append(f"'train.micro_batch_questions' ({t.micro_batch_questions}) must divide each rank's "
                            f"share of a mini-batch (mini_batch_questions / ranks = {m // world})")
    elif t.max_tokens_per_call <= 0:
        problems.append(f"'{where}': train.mini_batch_questions ({m}) must be a multiple of {ranks}: "
                        "loss calls of whole questions (train.max_tokens_per_call: 0)")
    elif needs_groups:
        problems.append(f"'{where}': train.mini_batch_questions ({m}) must be a multiple of {ranks}: "
                        f"{needs_groups} needs a question's responses in one loss call")
    elif (m * n) % world or t.questions_per_step % math.lcm(m, world):
        problems.append(f"'{where}': the ranks share each mini-batch's responses, so mini_batch_questions x "
                        f"responses_per_question ({m * n}) must be a multiple of {ranks}, and "
                        f"questions_per_step ({t.questions_per_step}) of {math.lcm(m, world)}")


def check_token_budget(where: str, t: TrainParams, max_model_len: int, problems: list[str],
                       needs_groups: str = "") -> None:
    """A loss call must hold its smallest item: one sequence of up to
    engine.max_model_len tokens, or, for an objective that needs whole groups
    (`needs_groups`, added by rlvr.settings.methods), a whole group of them (rlvr.training.loss_calls)."""
    if t.max_tokens_per_call <= 0:
        return
    need = max_model_len * (t.responses_per_question if needs_groups else 1)
    if t.max_tokens_per_call < need:
        what = (f"a whole group ({t.responses_per_question} x engine.max_model_len {max_model_len}; "
                f"{needs_groups} needs a question's responses in one call)" if needs_groups
                else f"one sequence (engine.max_model_len {max_model_len})")
        problems.append(f"'{where}': train.max_tokens_per_call ({t.max_tokens_per_call}) must hold {what}: "
                        f"set it to at least {need}")


TRAIN_KEYS = frozenset(f.name for f in dataclasses.fields(TrainParams))
