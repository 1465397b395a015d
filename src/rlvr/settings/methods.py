"""A method: the shared training settings (`train:` with the entry's
overrides) and one objective with its own settings (`methods.<name>:`).

The objective's settings dataclass builds and checks the entry's other keys;
what the objective needs (whole groups per loss call) meets the training
settings here. Every method's problems are reported at once.

    rlvr methods [RECIPE]    # each method: its objective and every setting off its default
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable

from rlvr.objectives.base import ObjectiveParams
from rlvr.objectives.registry import objectives
from rlvr.schema import ConfigError, build, unknown_name
from rlvr.settings.call_plan import CallPlan
from rlvr.settings.load import checked, core_params, read_yaml, with_methods
from rlvr.settings.sections import Params
from rlvr.settings.train import TrainParams
from rlvr.settings.train_rules import check_rank_shares, check_token_budget


@dataclass
class MethodConfig:
    """One method as a stage trains it: built once (build_method), its objective's loss looked up
    once, here, from the registry."""

    name: str
    train: TrainParams
    objective: ObjectiveParams  # the objective's settings dataclass; `.objective` is its name
    loss: Callable | None = None  # the registered objective's loss (None: an objective not registered)

    def __post_init__(self):
        registered = objectives().get(self.objective.objective)
        if self.loss is None and registered is not None:
            self.loss = registered.loss


def method_config(params: Params, name: str) -> MethodConfig:
    """`train:` defaults merged with `methods.<name>` overrides and the
    objective's settings, validated."""
    problems: list[str] = []
    method = build_method(params, name, problems)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))
    return method


def build_method(params: Params, name: str, problems: list[str]) -> MethodConfig:
    entry = params.methods.get(name)
    if entry is None:
        problems.append(unknown_name("methods", name, list(params.methods)) if params.methods
                        else "params.yaml has no 'methods:'")
        return MethodConfig(name, TrainParams(), ObjectiveParams())
    train, settings, chosen = dataclasses.replace(entry.train), entry.settings, entry.objective  # a copy: callers adjust theirs
    known = objectives()
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


def every_method(params: Params, problems: list[str]) -> dict[str, MethodConfig]:
    """Build every method of params, appending its problems."""
    return {name: build_method(params, name, problems) for name in params.methods}


def check_methods(params: Params) -> dict[str, MethodConfig]:
    """Every method of params, built; raises one ConfigError listing all problems."""
    problems: list[str] = []
    methods = every_method(params, problems)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))
    return methods


def load_recipe(path: str | Path = "params.yaml") -> Params:
    """load_params with every method's objective settings checked too."""
    return parse_recipe(read_yaml(path), str(path))


def parse_recipe(raw: dict, source: str = "params") -> Params:
    return checked(recipe_params, raw, source)


def recipe_params(raw: dict, problems: list[str]) -> Params | None:
    """Params from a raw mapping, appending every problem, the objectives' too."""
    params = core_params(raw, problems)
    if params is not None:
        every_method(params, problems)
        check_sweep(params, problems)
    return params


def sweep_configurations(params: Params) -> dict[str, list[dict[str, float]]]:
    """Each swept method's configurations: every combination of its grid's values, in order."""
    return {name: [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
            for name, grid in params.sweep.grid.items()}


def method_problems(params: Params, name: str, raw: dict) -> list[str]:
    """The problems of method `name` written as `raw` (its entry) in `params`."""
    try:
        method_config(with_methods(params, {name: raw}), name)
    except ConfigError as e:
        return e.problems
    return []


def check_sweep(params: Params, problems: list[str]) -> None:
    """sweep.grid: trained methods, settings they have, every configuration a valid method, the same
    number of configurations for every method (one tuning budget), and problems to validate on."""
    configurations = sweep_configurations(params)
    for name, configs in configurations.items():
        if name not in params.methods:
            problems.append(unknown_name("sweep.grid", name, list(params.methods), what="method"))
            continue
        entry = params.methods[name]
        raw = {**entry.settings, **{k: getattr(entry.train, k) for k in entry.overrides}}
        own = set(method_problems(params, name, raw))  # reported with the method itself
        for config in configs:
            new = [p for p in method_problems(params, name, {**raw, **config}) if p not in own]
            problems += [f"sweep.grid.{name} {config}: {p}" for p in new]
            if new:
                break
    counts = {name: len(configs) for name, configs in configurations.items()}
    if len(set(counts.values())) > 1:
        problems.append(f"'sweep.grid' gives the methods different budgets ({counts}): give each the same "
                        "number of configurations")
    if configurations and not params.data.validates:
        problems.append("'sweep.grid' scores each configuration on validation problems: set "
                        "data.arithmetic.n_validation_per_level or data.validation_size")


def check_with_objective(where: str, t: TrainParams, hp: ObjectiveParams, params: Params,
                         problems: list[str]) -> None:
    """The training settings' rules that depend on the objective (the others: rlvr.settings.train_rules.check_train)."""
    plan = CallPlan(t, params.launcher.world, hp.needs().whole_groups)
    if plan.world < 1 or not plan.needs_groups or not (plan.rows or plan.by_tokens):
        return  # (a world of no rank: reported with launcher's keys)
    if plan.rows or (t.mini_batch_questions >= 1 and t.mini_batch_questions % plan.world):
        check_rank_shares(where, t, plan.world, problems, needs_groups=hp.objective)
    if plan.by_tokens:
        check_token_budget(where, t, params.engine.max_model_len, problems, needs_groups=hp.objective)


def describe(params: Params) -> list[str]:
    """One line per method: its objective, each objective setting off the settings'
    default, and each training setting the entry overrides over `train:`."""
    lines = []
    for name, entry in params.methods.items():
        m = method_config(params, name)
        default = type(m.objective)(objective=m.objective.objective)
        changed = [f"{f.name}={getattr(m.objective, f.name)!r}" for f in fields(m.objective)
                   if f.name != "objective" and getattr(m.objective, f.name) != getattr(default, f.name)]
        changed += [f"train.{k}={getattr(m.train, k)!r}" for k in entry.overrides]
        lines.append(f"{name}: {m.objective.objective}" + (f" ({', '.join(changed)})" if changed else ""))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="List a recipe's methods: each one's objective and every setting "
                                             "off its default.")
    ap.add_argument("recipe", nargs="?", default="params.yaml", help="a params file (default: params.yaml)")
    args = ap.parse_args(argv)
    params = load_recipe(args.recipe)
    print("\n".join(describe(params)) or f"{args.recipe}: no methods")
    return 0


if __name__ == "__main__":
    from rlvr.cli import tool

    tool(main)
