"""The CUDA path: skipped without a GPU (conftest.py), run on a GPU node with
`pytest -m gpu tests/e2e/test_gpu.py` after `pip install -e .[gpu,dev]`.

The trainer's step for each objective of the recipes with the real CUDA vLLM
engine (external launcher, sleep mode) and DeepSpeed; the chunked LM head
against full logits; a checkpoint round trip with the CUDA generator; the
weight push into a sleeping engine. bench/gpu_check.sh covers the training
side on a machine without vLLM.
"""

import sys
from pathlib import Path

import pytest
import torch
from helpers import ALL_METHODS  # every registered objective with its first example

from rlvr.settings.load import parse_params
from rlvr.settings.methods import method_config

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


@pytest.fixture(scope="module")
def cuda_engine(tiny_model):
    from rlvr import distributed
    from rlvr.rollout.vllm_engine import RolloutEngine

    distributed.init(600)
    return RolloutEngine(str(tiny_model), dtype="bfloat16", max_model_len=512, enforce_eager=False, seed=0,
                         gpu_memory_utilization=0.3, sleep_mode=True)


def test_weight_push_into_a_sleeping_engine(cuda_engine, tiny_model):
    """Sleep (level 2), wake the weights, push, wake the KV cache: the engine
    generates with the pushed weights (the same weights give the same greedy text)."""
    from rlvr.rollout.vllm_engine import load_safetensors

    before = cuda_engine.generate(["1 + 1 ="], n=1, temperature=0.0, top_p=1.0, max_tokens=8, progress=False)
    free_awake = torch.cuda.mem_get_info()[0]
    cuda_engine.sleep()
    assert torch.cuda.mem_get_info()[0] > free_awake  # the engine gave memory back
    cuda_engine.load_weights(load_safetensors(tiny_model))
    after = cuda_engine.generate(["1 + 1 ="], n=1, temperature=0.0, top_p=1.0, max_tokens=8, progress=False)
    assert after[0][0].token_ids == before[0][0].token_ids
    zeros = [(name, torch.zeros_like(w)) for name, w in load_safetensors(tiny_model)]
    cuda_engine.sleep()
    cuda_engine.load_weights(zeros)
    changed = cuda_engine.generate(["1 + 1 ="], n=1, temperature=0.0, top_p=1.0, max_tokens=8, progress=False)
    assert changed[0][0].token_ids != before[0][0].token_ids
    cuda_engine.load_weights(load_safetensors(tiny_model))


@pytest.mark.parametrize("name", list(ALL_METHODS))
def test_trainer_step_on_cuda(cuda_engine, tiny_model, tmp_path, name):
    from helpers import tiny_params

    from rlvr.data.prepare import prepare
    from rlvr.training.trainer import Trainer

    raw = tiny_params(tmp_path, ALL_METHODS)
    raw["train"].update({"bf16": True, "zero_stage": 2})
    params = parse_params(raw)
    prepare(params.data)
    trainer = Trainer(params, method_config(params, name), str(tiny_model), tmp_path / "run", tmp_path / "final",
                      rollout_engine=cuda_engine)
    rows = trainer.train()
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["loss"] == r["loss"] and r.get("skipped_updates", 0) == 0 for r in rows)
    assert next(trainer.ds_engine.module.parameters()).device.type == "cuda"


def test_chunked_head_on_cuda_matches_full_logits():
    from rlvr.training import entropy, policy

    g = torch.Generator().manual_seed(0)
    weight = (torch.randn(5000, 64, generator=g) * 0.05).cuda().requires_grad_()
    hidden = torch.randn(300, 64, generator=g).cuda().requires_grad_()
    tokens = torch.randint(0, 5000, (300,), generator=g).cuda()
    topp = {"top_p": 0.8, "top_k": 1000}
    z = hidden @ weight.T / 0.7
    ref = torch.log_softmax(z, -1).gather(-1, tokens[:, None]).squeeze(-1) - entropy.topp_entropy(z, 1.0, **topp)
    ref_grads = torch.autograd.grad(ref.sum(), (hidden, weight))
    out = policy._checkpointed_blocks(hidden, weight, tokens, 0.7, ["topp_entropy"], topp)
    ours = out["logp"] - out["topp_entropy"]
    grads = torch.autograd.grad(ours.sum(), (hidden, weight))
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)
    chunked = policy._ChunkedHeadLogProb.apply(hidden, weight, tokens, 0.7, 64)
    torch.testing.assert_close(chunked, torch.log_softmax(z, -1).gather(-1, tokens[:, None]).squeeze(-1),
                               atol=1e-4, rtol=1e-4)


def test_checkpoint_round_trip_restores_the_cuda_generator():
    import gpu_check

    rows = []
    gpu_check.emit = lambda **row: rows.append(row) or row
    gpu_check.check_checkpoint(torch.device("cuda", torch.cuda.current_device()), cpu=False)
    assert rows[-1]["ok"], rows[-1]


def test_gpu_check_script_passes():
    import subprocess

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(["bash", "bench/gpu_check.sh"], cwd=root, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]



def test_a_streamed_reference_holds_one_layer_on_the_gpu_and_gives_the_resident_log_probs():
    """train.ref_offload on CUDA: between passes only the embeddings, norm and head
    are on the GPU (the layers in pinned CPU memory), and the log-probs equal the
    resident copy's."""
    import copy

    from transformers import LlamaConfig, LlamaForCausalLM

    from rlvr.training.deepspeed_engine import streamed
    from rlvr.training.packing import pack
    from rlvr.training.policy import evaluate_tokens

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=1024, num_hidden_layers=8,
                      num_attention_heads=4, num_key_value_heads=2)
    cpu = LlamaForCausalLM(cfg).eval().requires_grad_(False)
    cuda = torch.device("cuda")
    resident = copy.deepcopy(cpu).to(cuda)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    offloaded = streamed(cpu, cuda)
    layer_bytes = sum(p.numel() * p.element_size() for p in cpu.get_decoder().layers.parameters())
    assert torch.cuda.memory_allocated() - before < sum(p.numel() * p.element_size() for p in resident.parameters()) \
        - layer_bytes * 0.9
    assert all(p.device.type == "cpu" and p.is_pinned() for p in offloaded.get_decoder().layers.parameters())
    packed = pack([[1, 2, 3], [4, 5]], [[6, 7], [8, 9, 10]], pad_id=0).to(cuda)
    with torch.no_grad():
        a = evaluate_tokens(resident, packed, 0.7)["logp"]
        b = evaluate_tokens(offloaded, packed, 0.7)["logp"]
    assert torch.allclose(a, b, atol=1e-6)
    assert all(p.device.type == "cpu" for p in offloaded.get_decoder().layers.parameters())
