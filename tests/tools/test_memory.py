"""rlvr.tools.memory: the per-GPU budget, against hand arithmetic and the recipes."""

import dataclasses

import pytest
from helpers import REPO

from rlvr.schema import ConfigError
from rlvr.settings.load import load_params
from rlvr.settings.methods import method_config
from rlvr.tools import memory, model_shapes

GIB = 1 << 30
RECIPES = sorted((REPO / "params").glob("*.yaml"))


def test_parameter_counts_match_the_published_sizes():
    """1.78B (R1-Distill-Qwen-1.5B, untied), 1.54B (Qwen2.5-Math-1.5B, tied),
    7.62B (Qwen2-7B family), 8.03B (Llama-3.1-8B)."""
    shapes = model_shapes.KNOWN_SHAPES
    assert shapes["deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"].params / 1e9 == pytest.approx(1.777, abs=0.005)
    assert shapes["Qwen/Qwen2.5-Math-1.5B"].params / 1e9 == pytest.approx(1.544, abs=0.005)
    assert shapes["Qwen/Qwen2.5-Math-7B"].params / 1e9 == pytest.approx(7.616, abs=0.01)
    assert shapes["meta-llama/Llama-3.1-8B-Instruct"].params / 1e9 == pytest.approx(8.030, abs=0.01)


def test_resident_state_by_hand():
    """1.5B in bf16, ZeRO-2 over 8 ranks: weights 2P, optimizer 12P/8, fp32 gradient partition 4P/8."""
    params = load_params(REPO / "params" / "disco_1.5b.yaml")
    method = method_config(params, "grpo")
    shape = model_shapes.KNOWN_SHAPES[params.model.source]
    est = memory.budget(params, method, shape, 80 * GIB)
    p = shape.params
    assert est["resident"]["weights"] == 2 * p
    assert est["resident"]["optimizer"] == 12 * p / 8
    assert est["resident"]["gradients"] == 4 * p / 8
    assert est["tokens"] == 4 * (1024 + 8192)  # sequences_per_call: 4 on each of the 8 GPUs
    assert est["rollout"]["vLLM"] == params.engine.gpu_memory_utilization * 80 * GIB
    # checkpointed layer inputs: tokens x hidden x 2 bytes x layers, plus one layer's recompute
    assert est["update"]["activations"] > est["tokens"] * shape.hidden * 2 * shape.layers


def test_more_tokens_per_call_need_more_memory_and_the_error_names_the_setting():
    params = load_params(REPO / "params" / "disco_1.5b.yaml")
    method = method_config(params, "grpo")
    shape = model_shapes.KNOWN_SHAPES[params.model.source]
    small = memory.budget(params, method, shape, 80 * GIB)
    method.train.sequences_per_call, method.train.max_tokens_per_call = 0, 4 * 73_728
    large = memory.budget(params, method, shape, 80 * GIB)
    assert large["update_total"] > small["update_total"] + 40 * GIB
    found = memory.problems(params, method, large, 80 * GIB)
    # the setting and the value that fits: activations scale with the call's tokens
    room = 80 * GIB - (large["update_total"] - large["update"]["activations"])
    fits = int(4 * 73_728 * room / large["update"]["activations"])
    assert len(found) == 1 and "294,912 tokens" in found[0]
    assert f"lower train.max_tokens_per_call (294,912) to about {fits:,}" in found[0]
    assert "gradient_checkpointing" not in found[0]  # the recipe has it on already
    method.train.max_tokens_per_call = 0  # whole groups by count: 4 groups of 8 x 9,216 tokens, the same call
    method.train.micro_batch_questions = 4
    by_count = memory.budget(params, method, shape, 80 * GIB)
    assert by_count["tokens"] == large["tokens"]
    # a budget may be all response tokens (short prompts), so its LM-head estimate is the larger
    assert large["update_total"] - 1 * GIB < by_count["update_total"] <= large["update_total"]
    params.engine.gpu_memory_utilization = 0.95
    found = memory.problems(params, method, memory.budget(params, method, shape, 80 * GIB), 80 * GIB)
    assert any("engine.gpu_memory_utilization" in f for f in found)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_fits_a_141_gib_gpu(recipe):
    params = load_params(recipe)
    assert memory.check(params, 141 * GIB) or not params.methods  # an evaluation-only recipe trains nothing


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_fits_an_80_gib_gpu(recipe):
    params = load_params(recipe)
    assert memory.check(params, memory.GPU_80GB_GIB * GIB) or not params.methods


@pytest.mark.parametrize("size", ["7b", "8b"])
def test_trpa_fits_80_gib_with_its_reference_streamed_and_stops_with_the_reason_without(size):
    """DisCO's official grain (4 sequences per GPU, a group's scores gathered
    over the 8 GPUs) fits an 80 GB GPU at 7B and 8B; so does TRPA with its
    reference model off the GPU between passes (train.ref_offload, as the
    official scripts offload it). Kept resident beside vLLM's share, it does
    not fit, and the error names the share that would."""
    params = load_params(REPO / "params" / f"disco_{size}.yaml")
    assert memory.check(params, memory.GPU_80GB_GIB * GIB)
    est = memory.budget(params, method_config(params, "trpa"), memory.model_shape(params), 80 * GIB)
    assert est["resident"]["reference model"] == 0 and 0 < est["update"]["reference layer"] < 4 * GIB
    for entry in params.methods.values():
        entry.train.ref_offload = False
    with pytest.raises(ConfigError, match=r"methods.trpa: the rollout needs .* to at most 0\.(40|37)"):
        memory.check(params, memory.GPU_80GB_GIB * GIB)


def test_the_command_prints_a_budget_and_exits_by_fit(capsys):
    assert memory.main([str(REPO / "params" / "disco_1.5b.yaml"), "--gpu-gib", "80"]) == 0
    out = capsys.readouterr().out
    assert "rollout peak" in out and "update peak" in out and "fits" in out
    assert memory.main([str(REPO / "params" / "disco_7b.yaml"), "--gpu-gib", "40"]) == 1


def test_an_unknown_hub_model_asks_for_the_prepared_model(tmp_path):
    params = load_params(REPO / "params" / "disco_1.5b.yaml")
    params.model.source = "someone/unknown-model"
    params.model.out_dir = str(tmp_path / "absent")
    with pytest.raises(ConfigError, match="prepare_model"):
        memory.model_shape(params)
    (tmp_path / "absent").mkdir()
    (tmp_path / "absent" / "config.json").write_text(
        '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,'
        ' "intermediate_size": 128, "vocab_size": 1000, "tie_word_embeddings": true, "model_type": "llama"}')
    assert memory.model_shape(params).params == 1000 * 64 + 2 * memory.model_shape(params).layer_params + 64


def test_a_known_hub_model_wins_over_a_prepared_model_of_another_source(tmp_path):
    """models/base may hold the CPU default's model while a recipe is checked."""
    params = load_params(REPO / "params" / "disco_7b.yaml")
    params.model.out_dir = str(tmp_path)
    (tmp_path / "config.json").write_text(
        '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,'
        ' "intermediate_size": 128, "vocab_size": 1000, "tie_word_embeddings": true, "model_type": "llama"}')
    assert memory.model_shape(params) == model_shapes.KNOWN_SHAPES["deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"]


def test_several_ranks_count_two_nccl_communicators_and_float32_buckets():
    params = load_params(REPO / "params" / "disco_1.5b.yaml")
    method = method_config(params, "grpo")
    shape = memory.model_shape(params)
    est = memory.budget(params, method, shape, 80 * memory.GIB)
    assert est["resident"]["NCCL"] == 2 * memory.NCCL_COMMUNICATOR and params.launcher.world > 1
    assert est["update"]["buckets"] == 2 * memory.REDUCE_BUCKET * 4  # bf16 model, float32 reduction
    one = dataclasses.replace(params, launcher=dataclasses.replace(params.launcher, procs_per_node=1, nodes=1))
    assert memory.budget(one, method, shape, 80 * memory.GIB)["resident"]["NCCL"] == 0
