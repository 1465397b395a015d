"""The policy under training as DeepSpeed runs it, and its frozen reference.

The trainer sizes its loss calls (rlvr.training.loss_calls) and owns the accumulation
boundary: a mini-batch's number of calls follows its lengths, so DeepSpeed
steps the optimizer when told (engine.step()).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from rlvr.distributed import skip_cpu_shm_op
from rlvr.settings.buffers import REDUCE_BUCKET
from rlvr.training.packing import attention_implementation



def deepspeed_config(t, world: int) -> dict:
    """`t`: the method's TrainParams."""
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "train_batch_size": world,
        "managed_gradient_accumulation": False,
        "gradient_clipping": t.grad_clip,
        # buckets sized as rlvr.tools.memory counts them (DeepSpeed's default is 5e8 elements)
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
    import deepspeed
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if t.bf16 else torch.float32
    attention = {"attn_implementation": attention_implementation(t.padding_free)}
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, **attention)
    if t.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    ref_model = None
    if reference:
        ref_model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, **attention).eval()
        ref_model.requires_grad_(False)
        ref_model = streamed(ref_model, device) if t.ref_offload else ref_model.to(device)
    skip_cpu_shm_op()  # a process without distributed.init (a dry run, a test) joins a group of one here
    engine, *_ = deepspeed.initialize(model=model, optimizer=adamw(model, t), config=deepspeed_config(t, world))
    return engine, ref_model


def streamed(model, device: torch.device):
    """A frozen model whose decoder layers live in CPU memory (pinned where the device
    is a GPU) and visit `device` one at a time during a forward pass, as verl offloads
    the reference model's parameters; the rest (embeddings, final norm, head) lives on
    `device`. Between passes it holds one layer's worth of GPU memory at most, and its
    outputs are the resident model's: the same weights, the same operations."""
    decoder = model.get_decoder()
    layers = decoder.layers
    decoder.layers = torch.nn.ModuleList()  # everything but the layers goes to the device
    model.to(device)
    decoder.layers = layers
    pin = device.type == "cuda"
    for layer in layers:
        home = {name: (t.pin_memory() if pin else t) for name, t in layer.state_dict(keep_vars=True).items()}
        _go_home(home)(layer, (), None)  # the layer's weights are the home copies from the start
        layer.register_forward_pre_hook(_visit(home, device))
        layer.register_forward_hook(_go_home(home))
    return model


def _visit(home: dict, device: torch.device):
    def hook(layer, args):
        for name, t in layer.state_dict(keep_vars=True).items():
            t.data = home[name].data.to(device, non_blocking=True)
    return hook


def _go_home(home: dict):
    def hook(layer, args, output):
        for name, t in layer.state_dict(keep_vars=True).items():
            t.data = home[name].data  # frozen: the home copy is still right, nothing to copy back
    return hook


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
