"""train.ref_offload: the reference model's layers stay in CPU memory and visit the
device one at a time (rlvr.training.deepspeed_engine.streamed); its log-probs are the resident
model's."""

import copy

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rlvr.training.deepspeed_engine import streamed
from rlvr.training.packing import pack
from rlvr.training.policy import evaluate_tokens


def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128)
    return LlamaForCausalLM(cfg).eval().requires_grad_(False)


def test_streamed_reference_log_probs_equal_the_resident_ones():
    resident = tiny_llama()
    offloaded = streamed(copy.deepcopy(resident), torch.device("cpu"))
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 300, (n,), generator=g).tolist() for n in (5, 9, 3)]
    responses = [torch.randint(0, 300, (n,), generator=g).tolist() for n in (7, 2, 11)]
    packed = pack(prompts, responses, pad_id=0)
    with torch.no_grad():
        a = evaluate_tokens(resident, packed, 0.7)["logp"]
        b = evaluate_tokens(offloaded, packed, 0.7)["logp"]
    assert torch.equal(a, b)  # the same weights and operations: bit for bit


def test_each_layer_visits_the_device_during_its_forward_and_goes_home_after():
    model = tiny_llama()
    layers = model.get_decoder().layers
    homes = [{n: t.data_ptr() for n, t in layer.state_dict(keep_vars=True).items()} for layer in layers]
    seen = []
    device = torch.device("cpu")
    streamed(model, device)
    for layer in layers:  # runs after the streaming hooks: the layer as its forward sees it
        layer.register_forward_pre_hook(lambda mod, args: seen.append({p.device for p in mod.parameters()}))
    assert len(model.get_decoder().layers) == 3
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]))
    assert seen == [{device}] * 3
    assert [{n: t.data_ptr() for n, t in layer.state_dict(keep_vars=True).items()} for layer in layers] == homes
