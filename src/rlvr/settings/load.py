"""A params file, loaded: the schema (rlvr.settings.sections), `auto` settings for this
machine (rlvr.settings.hardware), the data sets' names (rlvr.data) and every method's
training settings, each problem reported at once, before any compute.

A method's objective settings are checked where the objectives are known
(rlvr.settings.methods), so the data and report stages load params without loss code.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

import yaml

from rlvr.cli import exit_on_config_error
from rlvr.schema import ConfigError, build, check_ranges, unknown_name
from rlvr.settings import hardware
from rlvr.settings.datasets import (
    ARITHMETIC,
    BENCHMARKS,
    HUB_TRAIN_SETS,
    LEVELS,
    OFFLINE_TRAIN_SETS,
    REGISTERED,
    entry_of,
    entry_problems,
    name_of,
    vendored,
)
from rlvr.settings.prompt import DATASET_SYSTEM
from rlvr.settings.sections import (
    LOADED_SECTIONS,
    EvalParams,
    MethodEntry,
    Params,
    ReportParams,
    check_eval_length,
    check_params,
)
from rlvr.settings.train import TRAIN_KEYS, TrainParams
from rlvr.settings.train_rules import check_train


def load_params(path: str | Path = "params.yaml") -> Params:
    return parse_params(read_yaml(path), str(path))


class DuplicateKey(yaml.YAMLError):
    pass


class ParamsLoader(yaml.SafeLoader):
    """YAML's safe loader, read as DVC reads params (ruamel.yaml, YAML 1.2):

    - numbers by YAML 1.2's rules too, so `5e-05` (what `dvc exp run -S
      train.lr=5e-5` writes) and `1e-5` are floats, not the strings YAML 1.1
      makes of a float without a dot;
    - a key written twice in one mapping is refused: yaml.safe_load keeps the
      last one silently, while DVC refuses the file, so a duplicated method
      would train under one reader and not the other."""

    yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKey(f"'{key}' is written twice in one mapping (lines {seen[key]} and {line}): keep one")
            seen[key] = line
        return super().construct_mapping(node, deep)


# YAML 1.2's floats that YAML 1.1 reads as strings: an exponent without a dot (1e-5, 5e-05) or with a
# bare dot (1.e-5). Added after 1.1's resolvers, so every 1.1 float and int still reads as before.
ParamsLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def read_yaml(path: str | Path) -> dict:
    """A params file's mapping; a missing or malformed file, or a key written
    twice, is a ConfigError."""
    path = Path(path)
    if not path.exists():
        raise ConfigError([f"file not found: {path} (run from the repository root)"], str(path))
    try:
        return yaml_value(path.read_text()) or {}
    except DuplicateKey as e:
        raise ConfigError([str(e)], str(path)) from e
    except yaml.YAMLError as e:
        raise ConfigError([f"not valid YAML: {e}"], str(path)) from e


def yaml_value(text: str):
    """`text` read as a params file reads (ParamsLoader): `5e-05` is a float."""
    return yaml.load(text, Loader=ParamsLoader)


def resolve_auto(raw: dict) -> dict:
    """Replace `auto` precision settings by what this machine runs fastest."""
    raw = copy.deepcopy(raw)
    model = raw.get("model")
    if isinstance(model, dict) and model.get("dtype") == "auto":
        model["dtype"] = hardware.preferred_dtype()
    sections = [raw.get("train"), *((raw.get("methods") or {}).values() if isinstance(raw.get("methods"), dict) else [])]
    for section in sections:
        if isinstance(section, dict) and section.get("bf16") == "auto":
            section["bf16"] = hardware.has_fast_bf16()
    return raw


def parse_params(raw: dict, source: str = "params") -> Params:
    return checked(core_params, raw, source)


def checked(build, raw: dict, source: str) -> Params:
    """`build(raw, problems)`'s Params, or one ConfigError listing every problem
    once (the shared train: settings are checked once per method)."""
    problems: list[str] = []
    params = build(raw, problems)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)), source)
    return params


def core_params(raw: dict, problems: list[str]) -> Params | None:
    """Params from a raw mapping, appending every problem but the objectives'."""
    raw = resolve_auto(raw)
    core = {k: v for k, v in raw.items() if k not in LOADED_SECTIONS}
    params = build(Params, core, "", problems, ignore=LOADED_SECTIONS)
    if params is None:
        return None
    check_params(params, problems)
    check_data_names(params, problems)
    shared = raw.get("train") or {}
    params.train = build(TrainParams, shared, "train.", problems) or TrainParams()
    shared = shared if isinstance(shared, dict) else {}  # not a mapping: reported by build
    methods = raw.get("methods") or {}
    if not isinstance(methods, dict):
        problems.append(f"'methods': expected a mapping of method names, got {type(methods).__name__}")
        methods = {}
    params.methods = method_entries(params, shared, methods, problems)
    params.report = build(ReportParams, raw.get("report") or {}, "report.", problems) or ReportParams()
    check_ablations(raw.get("report") or {}, methods, problems)
    params.checkpoints, params.checkpoint_eval = check_checkpoints(raw.get("checkpoints"), params, methods, problems)
    return params


def method_entries(params: Params, shared: dict, methods: dict, problems: list[str]) -> dict[str, MethodEntry]:
    """Each `methods.<name>:` split into its training settings (`train:` with
    the entry's overrides, checked) and its objective's settings, raw."""
    out = {}
    for name, entry in methods.items():
        entry = entry or {}
        if not isinstance(entry, dict):
            problems.append(f"'methods.{name}': expected a mapping, got {type(entry).__name__}")
            continue
        overrides = {k: v for k, v in entry.items() if k in TRAIN_KEYS}
        build(TrainParams, overrides, f"methods.{name}.", problems)  # a bad override, named where it is written
        train = build(TrainParams, {**shared, **overrides}, "train.", []) or TrainParams()  # reported: above, shared
        check_ranges(train, TrainParams.ranges, problems, where=lambda k, n=name, o=overrides: f"methods.{n}.{k}" if k in o
                     else f"train.{k}")
        check_train(f"methods.{name}", train, params.launcher.world, params.engine.max_model_len,
                    params.data.validates, problems)
        settings = {k: v for k, v in entry.items() if k not in TRAIN_KEYS}
        out[name] = MethodEntry(train, str(settings.get("objective", MethodEntry.objective)), settings, tuple(overrides))
    return out


def with_methods(params: Params, methods: dict) -> Params:
    """A copy of `params` whose methods are `methods` (raw entries over the
    same `train:`), checked: a method made after loading, as a test makes one."""
    problems: list[str] = []
    made = copy.deepcopy(params)
    made.methods = method_entries(made, dataclasses.asdict(params.train), methods, problems)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))
    return made


def check_checkpoints(checkpoints, params: Params, methods: dict,
                      problems: list[str]) -> tuple[dict[str, str], dict[str, EvalParams]]:
    """checkpoints: {name: hub id or local directory, or {source, eval}: the
    model evaluated with `eval:` changed by its own keys}, names apart from
    the methods and the base model. Returns the sources and the own evals."""
    if checkpoints is None:
        return {}, {}
    if not isinstance(checkpoints, dict):
        problems.append(f"'checkpoints': expected a mapping of name -> hub id or local directory, got {checkpoints!r}")
        return {}, {}
    sources, evals = {}, {}
    for name, entry in checkpoints.items():
        where = f"checkpoints.{name}"
        if name == "base" or name in methods:
            problems.append(f"'{where}': the name is taken by "
                            f"{'the base model' if name == 'base' else 'a method'}; rename the checkpoint")
        if isinstance(entry, dict):
            unknown = set(entry) - {"source", "eval"}
            if unknown:
                problems.append(f"'{where}': unknown key(s) {sorted(unknown)}; an entry is a hub id or directory, "
                                "or {source: <hub id or directory>, eval: {<eval: keys it changes>}}")
            own = build(EvalParams, {**dataclasses.asdict(params.eval), **(entry.get("eval") or {})},
                        f"{where}.eval.", problems)
            if own is not None:
                check_ranges(own, EvalParams.ranges,
                             problems, where=lambda k, w=where: f"{w}.eval.{k}")
                check_eval_length(own, params.engine, f"{where}.eval.", problems)
                evals[str(name)] = own
            entry = entry.get("source")
        if not isinstance(entry, str) or not entry:
            problems.append(f"'{where}': expected a hub id or a local directory, got {entry!r}")
        sources[str(name)] = entry
    return sources, evals


def check_ablations(report: dict, methods: dict, problems: list[str]) -> None:
    """report.ablations: {variant: full method}, both trained methods."""
    ablations = (report.get("ablations") or {}) if isinstance(report, dict) else {}
    if not isinstance(ablations, dict):
        problems.append(f"'report.ablations': expected a mapping of variant -> full method, got {ablations!r}")
        return
    for variant, full in ablations.items():
        for name in (variant, full):
            if name not in methods:
                problems.append(unknown_name(f"report.ablations ({variant}: {full})", name, tuple(methods),
                                             what="method"))


def check_data_names(p: Params, problems: list[str]) -> None:
    """Each set a registered name or an entry (its file's content: rlvr.data.checks), each
    from a source this machine is set to read, and each level known."""
    d = p.data
    train_ok = (ARITHMETIC, *HUB_TRAIN_SETS, *OFFLINE_TRAIN_SETS)
    for where, items, valid in (("data.train_sets", d.train_sets, train_ok), ("data.benchmarks", d.benchmarks,
                                                                               BENCHMARKS)):
        entry_problems(where, items, problems)
        for item in items:
            if isinstance(item, str) and item not in valid:
                problems.append(unknown_name(where, item, valid) + " (or a dataset entry: docs/data.md)")
            elif item != ARITHMETIC and _from_hub_offline(entry_of(item), d):
                problems.append(f"'{where}' has '{name_of(item)}', which comes from the hub: set data.source: online "
                                "(or data.hub_mirror to local copies)"
                                + (f", or train on a vendored set ({', '.join(OFFLINE_TRAIN_SETS)})"
                                   if where == "data.train_sets" else ""))
    lacking = [n for n in d.train_sets if n == ARITHMETIC or (n in REGISTERED or not isinstance(n, str))
               and entry_of(n).system_key is None]
    if p.prompt.for_training().system == DATASET_SYSTEM and lacking:
        turns = [n for n, e in REGISTERED.items() if e.system_key]
        problems.append(f"'prompt.train.system' is {DATASET_SYSTEM}, but {', '.join(map(name_of, lacking))} carry no "
                        f"system turn (sets of chat turns do: {', '.join(turns)}, a verl parquet, an entry's system "
                        "column): set prompt.train.system to a text, or \"\" for none")
    for lv in d.arithmetic.levels:
        if lv not in LEVELS:
            problems.append(f"'data.arithmetic.levels' has unknown level {lv}; valid: {list(LEVELS)}")


def _from_hub_offline(e, d) -> bool:
    """A set only the hub has, while this machine is set to read no hub (data.source: offline, no mirror)."""
    return bool(e.hub) and not e.path and vendored(e.name) is None and d.source == "offline" and not d.hub_mirror


def params_or_exit(path: str = "params.yaml") -> Params:
    """A stage's params, or its errors on stderr and exit status 2."""
    with exit_on_config_error():
        return load_params(path)
