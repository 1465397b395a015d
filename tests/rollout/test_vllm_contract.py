"""Every vLLM call the GPU path makes, pinned against the installed vLLM.

The CPU and CUDA wheels of vLLM 0.32.0 ship the same Python code, so the
signatures checked here are the ones a GPU node runs. Where vLLM's code runs
a call on CPU, it is called: the engine core and executor of a CPU engine
sleep and wake exactly as on a GPU (only the workers' memory moves are
no-ops), and the weight reload is the GPU model runner's own method.
"""

import gc
import inspect
import typing

import pytest
import torch
import vllm
from helpers import REPO
from vllm.config.parallel import DistributedExecutorBackend
from vllm.v1.executor.abstract import SLEEP_TAGS
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm.v1.worker.gpu_worker import Worker as GPUWorker

from rlvr.rollout.vllm_engine import WAKE_KV_CACHE, WAKE_WEIGHTS, RolloutEngine, engine_kwargs, load_safetensors

GPU_KWARGS = engine_kwargs("m", "bfloat16", 9216, False, 7, 0.4, sleep_mode=True, cuda=True, world=8, block_size=32)


def binds(fn, *args, **kwargs) -> bool:
    inspect.signature(fn).bind(*args, **kwargs)  # raises TypeError on a wrong name or count
    return True


def test_the_pinned_vllm_is_the_installed_one():
    assert vllm.__version__ == "0.32.0"
    assert "vllm==0.32.0" in (REPO / "pyproject.toml").read_text()


def test_the_gpu_engine_arguments_are_vllm_engine_args():
    assert GPU_KWARGS["distributed_executor_backend"] == "external_launcher"
    assert "external_launcher" in typing.get_args(DistributedExecutorBackend)
    assert GPU_KWARGS["enable_sleep_mode"] is True
    args = vllm.EngineArgs(**GPU_KWARGS)  # an unknown keyword raises
    assert {k: getattr(args, k) for k in GPU_KWARGS} == GPU_KWARGS


def test_cpu_engines_take_the_external_launcher_only_under_several_ranks():
    one = engine_kwargs("m", "bfloat16", 512, True, 0, 0.5, sleep_mode=True, cuda=False, world=1)
    two = engine_kwargs("m", "bfloat16", 512, True, 0, 0.5, sleep_mode=True, cuda=False, world=2)
    assert "distributed_executor_backend" not in one and two["distributed_executor_backend"] == "external_launcher"
    assert "enable_sleep_mode" not in two  # refused on CPU by vLLM's ModelConfig


def test_sleep_and_wake_calls_match_the_engine_and_the_gpu_worker():
    assert binds(vllm.LLM.sleep, None, level=2)
    assert binds(vllm.LLM.wake_up, None, tags=WAKE_WEIGHTS) and binds(vllm.LLM.wake_up, None, tags=WAKE_KV_CACHE)
    assert set(WAKE_WEIGHTS + WAKE_KV_CACHE) == set(SLEEP_TAGS)  # both woken: the scheduler resumes
    # the executor forwards them to each worker as collective_rpc("sleep", kwargs={"level": ...}) and wake_up(tags)
    for worker in (GPUWorker, CPUWorker):
        assert binds(worker.sleep, None, level=2) and binds(worker.wake_up, None, tags=WAKE_WEIGHTS)


def test_the_weight_push_reaches_the_gpu_model_runner_with_its_keyword():
    assert binds(vllm.LLM.collective_rpc, None, "reload_weights", kwargs={"weights_iterator": []})
    assert binds(GPUModelRunner.reload_weights, None, weights_iterator=[])
    assert CPUModelRunner.reload_weights is GPUModelRunner.reload_weights  # a CPU push runs the GPU code
    assert binds(vllm.LLM.reset_prefix_cache, None)


@pytest.mark.slow
def test_the_gpu_call_sequence_runs_on_a_cpu_engine(tiny_model):
    """sleep(level=2), wake_up(weights), reload_weights, wake_up(kv_cache),
    reset_prefix_cache, as the trainer calls them each step: the engine is
    asleep in between, fully awake only after the second wake, and generates
    with the pushed weights."""
    gc.collect()  # an engine an earlier test left tears vLLM's process-wide groups down when collected
    engine = RolloutEngine(str(tiny_model), dtype="float32", max_model_len=128, kv_cache_gib=1, seed=0,
                           sleep_mode=True)
    woke = []
    wake_up = engine.llm.wake_up
    engine.llm.wake_up = lambda tags=None: woke.append((tags, wake_up(tags=tags))) or woke[-1][1]
    greedy = dict(n=1, temperature=0.0, top_p=1.0, max_tokens=8, progress=False)
    try:
        before = engine.generate(["1 + 1 ="], **greedy)[0][0].token_ids
        engine.sleep()
        assert engine.llm.llm_engine.is_sleeping()
        engine.load_weights(load_safetensors(tiny_model))
        assert woke == [(WAKE_WEIGHTS, False), (WAKE_KV_CACHE, True)] and not engine.llm.llm_engine.is_sleeping()
        assert engine.generate(["1 + 1 ="], **greedy)[0][0].token_ids == before
        engine.sleep()
        engine.load_weights((name, torch.zeros_like(w)) for name, w in load_safetensors(tiny_model))
        assert engine.generate(["1 + 1 ="], **greedy)[0][0].token_ids != before
    finally:
        del engine
        gc.collect()
