"""The DeepSpeed engine as the recipes configure it (bf16, ZeRO-2): gradients
accumulate over a mini-batch's loss calls and reduce in float32."""

import pytest
import torch

from rlvr.settings.train import TrainParams
from rlvr.training.deepspeed_engine import adamw, deepspeed_config

CALLS = 8


def train_settings(**kw):
    return TrainParams(**{"lr": 1e-3, "weight_decay": 0.0, "grad_clip": 1e9, "zero_stage": 2, "bf16": True, **kw})


def test_bf16_zero_recipes_accumulate_and_reduce_in_float32():
    conf = deepspeed_config(train_settings(), 8)
    assert conf["data_types"] == {"grad_accum_dtype": "fp32"} and conf["communication_data_type"] == "fp32"
    # without ZeRO DeepSpeed refuses a bf16 model with float32 accumulation; float32 models need nothing
    assert "data_types" not in deepspeed_config(train_settings(zero_stage=0), 1)
    assert "data_types" not in deepspeed_config(train_settings(bf16=False), 1)


@pytest.mark.slow
def test_the_engine_sums_every_loss_call_of_a_mini_batch_in_float32(monkeypatch):
    """Several backward calls, one step (the trainer owns the accumulation
    boundary): Adam's first moment after the step is 0.1 x the summed
    gradient, which matches a float32 model's sum to bf16 forward precision
    (keeping only the last call would be off by far more)."""
    import deepspeed
    from transformers import LlamaConfig, LlamaForCausalLM

    from rlvr import distributed

    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29671", "RANK": "0", "LOCAL_RANK": "0",
                 "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(k, v)
    distributed.init()  # a group of one (a no-op where an earlier test made it)
    cfg = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1)
    torch.manual_seed(0)
    reference = LlamaForCausalLM(cfg)
    inputs = [torch.randint(0, 300, (1, 12)) for _ in range(CALLS)]
    for x in inputs:
        reference(input_ids=x, labels=x).loss.backward()
    summed = torch.cat([p.grad.flatten() for p in reference.parameters()])
    last = reference.__class__(cfg)
    last.load_state_dict(reference.state_dict())
    last(input_ids=inputs[-1], labels=inputs[-1]).loss.backward()
    only_last = torch.cat([p.grad.flatten() for p in last.parameters()])

    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.load_state_dict(reference.state_dict())
    t = train_settings()
    engine, *_ = deepspeed.initialize(model=model, optimizer=adamw(model, t), config=deepspeed_config(t, 1))
    assert engine.optimizer.gradient_accumulation_dtype == engine.optimizer.communication_data_type == torch.float32
    for x in inputs:
        engine.backward(engine(input_ids=x, labels=x).loss, scale_wrt_gas=False)
    engine.step()
    first_moment = next(iter(engine.optimizer.optimizer.state.values()))["exp_avg"][: summed.numel()] / 0.1
    error = lambda g: ((g - summed).norm() / summed.norm()).item()  # noqa: E731
    assert error(first_moment) < 0.02 < error(only_last)
