"""Objectives by name, as verl registers its policy losses: an objective
module registers its loss with the dataclass of its settings, and the
trainer asks those settings what the loss needs (`ObjectiveParams.needs`).

    @dataclass
    class HalfClipParams(PolicyTermParams):
        scale: float = 0.5  # what the setting does

    @register("half_clip", HalfClipParams, examples=({}, {"scale": 0.25}))
    def half_clip(batch: PolicyBatch, p: HalfClipParams) -> LossOutput: ...

Every module of this package is imported on the first lookup, so a new
objective is its module plus a `methods:` entry in params; a module outside
the package registers itself when imported. Its examples (settings, the
ablation switches among them) are what tests/objectives/test_objective_contract.py runs
every objective with: `pytest tests/objectives/test_objective_contract.py -k half_clip`.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

from rlvr.objectives.base import LossOutput, ObjectiveParams, PolicyBatch

# modules of this package that hold no objective
_NOT_OBJECTIVES = {"base", "registry", "advantages", "policy_term"}


@dataclass(frozen=True)
class Objective:
    name: str
    loss: Callable[[PolicyBatch, ObjectiveParams], LossOutput]
    params: type[ObjectiveParams]  # the dataclass of its settings (`methods.<name>:` in params)
    examples: tuple[dict, ...]  # settings the contract tests run it with (the first: its main one)
    # A pure regularizer moves no probability toward rewarded responses by itself: the contract's
    # direction check (a step raises the rewarded responses over the others) does not apply to it.
    regularizer: bool = False

    def example_settings(self) -> list[ObjectiveParams]:
        return [self.params(objective=self.name, **values) for values in self.examples]


_REGISTRY: dict[str, Objective] = {}


def register(name: str, params: type[ObjectiveParams], examples: tuple[dict, ...], regularizer: bool = False):
    """Decorator: the loss function `fn(batch, params)` under `name`, with the
    settings of `examples` (at least one) for the contract tests; `regularizer`:
    it does not reward anything by itself (the direction check skips it)."""
    if not (isinstance(params, type) and issubclass(params, ObjectiveParams)):
        raise TypeError(f"objective '{name}': its settings must be an ObjectiveParams dataclass, got {params!r}")
    if not examples or not all(isinstance(e, dict) for e in examples):
        raise TypeError(f"objective '{name}': examples must be one or more dicts of its settings, got {examples!r}")

    def add(fn):
        known = _REGISTRY.get(name)
        if known is not None and known.loss.__qualname__ != fn.__qualname__:
            raise ValueError(f"objective '{name}' is registered twice ({known.loss.__module__} and {fn.__module__})")
        _REGISTRY[name] = Objective(name, fn, params, tuple(examples), regularizer)
        return fn

    return add


def unregister(name: str) -> None:
    """Remove `name` (tests that register a throwaway objective)."""
    _REGISTRY.pop(name, None)


@functools.cache
def _import_package() -> None:
    """Import every module of the package once: each registers its objectives."""
    for info in pkgutil.iter_modules(importlib.import_module("rlvr.objectives").__path__):
        if info.name not in _NOT_OBJECTIVES:
            importlib.import_module(f"rlvr.objectives.{info.name}")


def objectives() -> dict[str, Objective]:
    """Every registered objective, by name (whatever order their modules were imported in)."""
    _import_package()
    return dict(sorted(_REGISTRY.items()))


def objective(name: str) -> Objective:
    found = objectives().get(name)
    if found is None:
        raise KeyError(f"unknown objective '{name}'; registered: {', '.join(sorted(_REGISTRY))}")
    return found


def examples() -> list[tuple[str, int, ObjectiveParams]]:
    """(objective, example index, its settings) of every registered objective."""
    return [(name, i, hp) for name, spec in objectives().items() for i, hp in enumerate(spec.example_settings())]


def settings(name: str, **values) -> ObjectiveParams:
    """The settings dataclass of objective `name` with `values` (the rest at their defaults)."""
    return objective(name).params(objective=name, **values)
