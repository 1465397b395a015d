"""The training settings every method shares (`train:`, which a method's
entry may override key by key), with their ranges (their rules:
rlvr.settings.train_rules)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from rlvr.schema import AT_LEAST_0, AT_LEAST_1, FRACTION, POSITIVE, Range


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


TRAIN_KEYS = frozenset(f.name for f in dataclasses.fields(TrainParams))
