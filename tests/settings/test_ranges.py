"""Every numeric setting has a range, and every range refuses a planted value,
named where it was written: the core sections, `train:` and a method's
override of it, and each registered objective's own settings."""

import copy
import re

import pytest
import yaml
from helpers import REPO

from rlvr.objectives.registry import objectives
from rlvr.schema import ConfigError, Range, numeric_settings
from rlvr.settings.load import load_params
from rlvr.settings.methods import parse_recipe
from rlvr.settings.sections import CORE, LOADED_SECTIONS, Params
from rlvr.settings.train import TrainParams

TRAIN = TrainParams.ranges

RAW = yaml.safe_load((REPO / "params.yaml").read_text())
CORE_SETTINGS = {k: t for k, t in numeric_settings(Params).items() if k.split(".")[0] not in LOADED_SECTIONS}
OBJECTIVE_SETTINGS = [(name, key, tp) for name, spec in sorted(objectives().items())
                      for key, tp in numeric_settings(spec.params).items()]


def problems_of(raw: dict) -> str:
    with pytest.raises(ConfigError) as e:
        parse_recipe(raw)
    return str(e.value)


def planted(key: str, tp: type, allowed: Range):
    """A value `allowed` refuses, in the shape the key takes (a list, a mapping of sets)."""
    value = allowed.outside(integer=tp is int)
    if key in ("seeds", "data.arithmetic.levels"):
        return [value]
    return {"arithmetic": value} if key in ("eval.limits", "eval.k_per_set") else value


def test_every_numeric_setting_has_a_range():
    assert set(CORE) == set(CORE_SETTINGS)
    assert set(TRAIN) == set(numeric_settings(TrainParams))
    for name, spec in objectives().items():
        assert set(spec.params.ranges) == set(numeric_settings(spec.params)), name


@pytest.mark.parametrize("key", sorted(CORE))
def test_a_core_setting_out_of_range_is_refused(key):
    raw = copy.deepcopy(RAW)
    *path, last = key.split(".")
    section = raw
    for part in path:
        section = section.setdefault(part, {})
    section[last] = planted(key, CORE_SETTINGS[key], CORE[key])
    assert f"'{key}' must be {CORE[key]}" in problems_of(raw)


@pytest.mark.parametrize("key", sorted(TRAIN))
def test_a_training_setting_out_of_range_is_refused_where_it_is_written(key):
    bad = planted(key, numeric_settings(TrainParams)[key], TRAIN[key])
    shared = copy.deepcopy(RAW)
    shared["train"][key] = bad
    assert f"'train.{key}' must be {TRAIN[key]}" in problems_of(shared)
    override = copy.deepcopy(RAW)
    override["methods"]["grpo"][key] = bad
    text = problems_of(override)
    assert f"'methods.grpo.{key}' must be {TRAIN[key]}" in text and f"'train.{key}' must be" not in text


@pytest.mark.parametrize("name, key, tp", OBJECTIVE_SETTINGS, ids=[f"{n}.{k}" for n, k, _ in OBJECTIVE_SETTINGS])
def test_an_objective_setting_out_of_range_is_refused(name, key, tp):
    spec = objectives()[name]
    allowed = spec.params.ranges[key]
    raw = copy.deepcopy(RAW)
    raw["methods"] = {"m": {"objective": name, **spec.examples[0], key: planted(key, tp, allowed)}}
    raw.pop("sweep", None)  # the default's sweep names its methods
    assert f"'methods.m.{key}' must be {allowed}" in problems_of(raw)


def test_the_values_a_user_met_are_refused_at_once():
    raw = copy.deepcopy(RAW)
    raw["eval"].update(max_new_tokens=0, limits={"math500": -5})
    raw["verifier"]["group_timeout_s"] = -5
    raw["train"]["temperature"] = -1
    raw["methods"]["disco_logl"].update(beta=-1.0, delta=-1e-4)
    raw["methods"]["grpo"]["lr"] = "abc"
    text = problems_of(raw)
    for said in ("'eval.max_new_tokens' must be >= 1", "'eval.limits' must be >= 1", "'train.temperature' must be > 0",
                 "'verifier.group_timeout_s' must be > 0", "'methods.disco_logl.beta' must be >= 0",
                 "'methods.disco_logl.delta' must be >= 0", "'methods.grpo.lr' must be float, got str 'abc'"):
        assert said in text, said


def test_a_method_written_twice_is_refused(tmp_path):
    text = (REPO / "params.yaml").read_text()
    twice = tmp_path / "params.yaml"
    twice.write_text(text.replace("\nmethods:\n", "\nmethods:\n  grpo:\n    objective: dapo\n", 1))
    with pytest.raises(ConfigError, match=r"'grpo' is written twice in one mapping \(lines \d+ and \d+\)"):
        load_params(twice)


@pytest.mark.parametrize("written, value", [("5e-05", 5e-05), ("1e-5", 1e-5), ("1.0e-5", 1e-5), ("3.0e-5", 3e-5),
                                            ("1.e-5", 1e-5), ("-2E+3", -2000.0), ("1E3", 1000.0)])
def test_numbers_read_as_dvc_writes_them(tmp_path, written, value):
    """`dvc exp run -S train.lr=5e-5` writes `lr: 5e-05`, which YAML 1.1 reads as a string;
    DVC (YAML 1.2) reads a float, and so must the stages."""
    text = (REPO / "params.yaml").read_text()
    lr = tmp_path / "params.yaml"
    key = "lr" if written[0] != "-" else "weight_decay"
    lr.write_text(re.sub(rf"\n  {key}: \S+", f"\n  {key}: {written}", text, count=1))
    if written[0] == "-":  # a negative weight decay: a float, so its range (not its type) refuses it
        with pytest.raises(ConfigError, match=r"'train.weight_decay' must be >= 0"):
            load_params(lr)
        return
    assert load_params(lr).methods["grpo"].train.lr == value


@pytest.mark.parametrize("written", ["5e", "e5", "1e5x", "1.2.3"])
def test_a_string_that_only_looks_numeric_stays_a_string(written):
    from rlvr.settings.load import yaml_value

    assert yaml_value(f"a: {written}")["a"] == written
    assert yaml.safe_load("a: 1e-5")["a"] == "1e-5"  # yaml's own loader untouched
