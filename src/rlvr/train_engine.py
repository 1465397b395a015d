"""The policy under training as DeepSpeed runs it, and its frozen reference.

The trainer sizes its loss calls (rlvr.loss_calls) and owns the accumulation
boundary: a mini-batch's number of calls follows its lengths, so DeepSpeed
steps the optimizer when told (engine.step()).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from rlvr.distributed import skip_cpu_shm_op
from rlvr.memory import REDUCE_BUCKET
from rlvr.policy import attention_implementation


def deepspeed_config(t, world: int) -> dict:
    """`t`: the method's TrainParams."""
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "train_batch_size": world,
        "managed_gradient_accumulation": False,
        "gradient_clipping": t.grad_clip,
        # buckets sized as rlvr.memory counts them (DeepSpeed's default is 5e8 elements)
        "zero_optimization": {"stage": t.zero_stage, "reduce_bucket_size": REDUCE_BUCKET,
                              "allgather_bucket_size": REDUCE_BUCKET},
        "bf16": {"enabled": t.bf16},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
        **float32_gradients(t),
    }


def float32_gradients(t) -> dict:
    """DeepSpeed's settings for TrainParams.float32_gradients (its default for
    both dtypes is the model's; ZeRO's optimizer takes them)."""
    if not (t.bf16 and t.float32_gradients):
        return {}
    return {"data_types": {"grad_accum_dtype": "fp32"}, "communication_data_type": "fp32"}


def adamw(model, t) -> torch.optim.AdamW:
    """AdamW with torch's fused kernel (CPU and CUDA): one pass over the
    parameters instead of a dozen, ~7x faster per step on CPU. DeepSpeed's
    ZeRO/bf16 wrapper re-points it at its float32 master partitions."""
    return torch.optim.AdamW(model.parameters(), lr=t.lr, betas=(0.9, 0.999), weight_decay=t.weight_decay,
                             fused=True)


def policy_engines(model_path: str, t, reference: bool, world: int, device: torch.device):
    """The DeepSpeed engine of the policy (it moves the model to this rank's
    device, set by rlvr.distributed.init) and, when `reference`, a frozen
    copy of the initial weights on the same device (None otherwise)."""
    from transformers import AutoModelForCausalLM

    import deepspeed

    dtype = torch.bfloat16 if t.bf16 else torch.float32
    attention = {"attn_implementation": attention_implementation(t.padding_free)}
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, **attention)
    if t.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    ref_model = None
    if reference:
        ref_model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, **attention).to(device).eval()
        ref_model.requires_grad_(False)
    skip_cpu_shm_op()  # a process without distributed.init (a dry run, a test) joins a group of one here
    engine, *_ = deepspeed.initialize(model=model, optimizer=adamw(model, t), config=deepspeed_config(t, world))
    return engine, ref_model


def warmup_lr(step: int, lr: float, warmup_steps: int) -> float:
    """The learning rate of rollout step `step` (0-based): linear warm-up over
    `warmup_steps` rollout steps, then constant. As in verl's constant schedule
    with warm-up, stepped once per rollout step after the update, the first
    step runs at 0 (factors 0, 1/W, ..., (W-1)/W, then 1)."""
    return lr if warmup_steps <= 0 else lr * min(1.0, step / warmup_steps)


@contextmanager
def full_weights(engine, zero_stage: int):
    """(name, tensor) of the engine's module, whole on this rank (ZeRO-3 gathers
    its partitions first: every rank must enter together)."""
    module = engine.module
    if zero_stage == 3:
        import deepspeed

        with deepspeed.zero.GatheredParameters(list(module.parameters())):
            yield [(n, p.detach().clone()) for n, p in module.state_dict().items()]
    else:
        yield ((n, p.detach()) for n, p in module.state_dict().items())
