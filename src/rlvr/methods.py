"""A method: the shared training settings (`train:` with the entry's
overrides) and one objective with its own settings (`methods.<name>:`).

The objective's settings dataclass builds and checks the entry's other keys;
what the objective needs (whole groups per loss call) meets the training
settings here. Every method's problems are reported at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from rlvr.config import ConfigError, Params, TrainParams, build, method_entry, unknown_name
from rlvr.objectives.base import ObjectiveParams
from rlvr.objectives.registry import objectives
from rlvr.params import core_params, read_yaml


@dataclass
class MethodConfig:
    name: str
    train: TrainParams
    objective: ObjectiveParams  # the objective's settings dataclass; `.objective` is its name


def method_config(params: Params, name: str) -> MethodConfig:
    """`train:` defaults merged with `methods.<name>` overrides and the
    objective's settings, validated."""
    problems: list[str] = []
    method = build_method(params, name, problems)
    if problems:
        raise ConfigError(problems)
    return method


def build_method(params: Params, name: str, problems: list[str]) -> MethodConfig:
    train, settings = method_entry(params, name, problems)
    known = objectives()
    chosen = settings.get("objective", ObjectiveParams.objective)
    where = f"methods.{name}"
    if chosen not in known:
        problems.append(unknown_name(f"{where}.objective", chosen, sorted(known)))
        return MethodConfig(name, train, ObjectiveParams(objective=str(chosen)))
    cls = known[chosen].params
    hp = build(cls, settings, f"{where}.", problems) or cls(objective=chosen)
    hp.objective = chosen
    hp.check(where, problems)
    check_with_objective(where, train, hp, params, problems)
    return MethodConfig(name, train, hp)


def check_methods(params: Params) -> None:
    """Every method of params; raises one ConfigError listing all problems."""
    problems: list[str] = []
    for name in params.extra.get("methods") or {}:
        build_method(params, name, problems)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))


def load_recipe(path: str | Path = "params.yaml") -> Params:
    """load_params with every method's objective settings checked too."""
    path = Path(path)
    if not path.exists():
        raise ConfigError([f"file not found: {path} (run from the repository root)"], str(path))
    return parse_recipe(read_yaml(path), str(path))


def parse_recipe(raw: dict, source: str = "params") -> Params:
    problems: list[str] = []
    params = core_params(raw, problems)
    if params is not None:
        methods = params.extra.get("methods") or {}
        for name in methods if isinstance(methods, dict) else ():
            build_method(params, name, problems)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)), source)
    return params


def check_with_objective(where: str, t: TrainParams, hp: ObjectiveParams, params: Params,
                         problems: list[str]) -> None:
    whole = hp.needs().whole_groups
    check_rank_shares(where, t, hp.objective, whole, params.launcher.world, problems)
    check_token_budget(where, t, hp.objective, whole, params, problems)
    if hp.overlong_buffer >= t.max_response_tokens:
        problems.append(f"'{where}.overlong_buffer' must be below train.max_response_tokens")


def check_rank_shares(where: str, t: TrainParams, name: str, whole_groups: bool, world: int,
                      problems: list[str]) -> None:
    """Each rank takes an equal share of every mini-batch: whole questions, or,
    with token-budget calls and an objective that needs no whole group, an
    equal slice of its responses (rlvr.rollout_groups.rows_shared)."""
    m, n, ranks = t.mini_batch_questions, t.responses_per_question, f"the number of ranks ({world} = " \
        "launcher.procs_per_node x launcher.nodes)"
    if m < 1:
        return  # reported with questions_per_step
    whole = t.max_tokens_per_call <= 0 or whole_groups
    if m % world == 0:
        if t.max_tokens_per_call <= 0 and (t.micro_batch_questions < 1 or (m // world) % t.micro_batch_questions):
            problems.append(f"'train.micro_batch_questions' ({t.micro_batch_questions}) must divide each rank's "
                            f"share of a mini-batch (mini_batch_questions / ranks = {m // world})")
    elif whole:
        why = (f"{name} needs a question's responses in one loss call" if whole_groups
               else "loss calls of whole questions (train.max_tokens_per_call: 0)")
        problems.append(f"'{where}': train.mini_batch_questions ({m}) must be a multiple of {ranks}: {why}")
    elif (m * n) % world or t.questions_per_step % math.lcm(m, world):
        problems.append(f"'{where}': the ranks share each mini-batch's responses, so mini_batch_questions x "
                        f"responses_per_question ({m * n}) must be a multiple of {ranks}, and "
                        f"questions_per_step ({t.questions_per_step}) of {math.lcm(m, world)}")


def check_token_budget(where: str, t: TrainParams, name: str, whole_groups: bool, params: Params,
                       problems: list[str]) -> None:
    """A loss call must hold its smallest item: one sequence of up to
    engine.max_model_len tokens, or a whole group of them for the objectives
    that need whole groups (rlvr.loss_calls)."""
    if t.max_tokens_per_call <= 0:
        return
    need = params.engine.max_model_len * (t.responses_per_question if whole_groups else 1)
    if t.max_tokens_per_call < need:
        what = (f"a whole group ({t.responses_per_question} x engine.max_model_len {params.engine.max_model_len}; "
                f"{name} needs a question's responses in one call)" if whole_groups
                else f"one sequence (engine.max_model_len {params.engine.max_model_len})")
        problems.append(f"'{where}': train.max_tokens_per_call ({t.max_tokens_per_call}) must hold {what}: "
                        f"set it to at least {need}")
