import copy

import pytest
import yaml

from rlvr.config import ConfigError, load_params, parse_params


@pytest.fixture
def raw(repo):
    return yaml.safe_load((repo / "params.yaml").read_text())


def test_default_params_load(repo):
    p = load_params(repo / "params.yaml")
    assert p.eval.k >= 1 and p.data.source == "offline"


def test_unknown_key_suggests_closest(raw):
    raw["eval"]["temprature"] = 0.5
    with pytest.raises(ConfigError, match="did you mean 'eval.temperature'"):
        parse_params(raw)


def test_every_problem_reported_at_once(raw):
    bad = copy.deepcopy(raw)
    bad["eval"]["k"] = "four"
    bad["data"]["benchmarks"] = ["math500", "amc2"]
    bad["engine"]["max_model_len"] = 128
    bad["verfier"] = {}
    with pytest.raises(ConfigError) as e:
        parse_params(bad)
    msg = str(e.value)
    assert "'eval.k' must be int" in msg
    assert "did you mean 'amc23'" in msg
    assert "did you mean 'verifier'" in msg
    assert "eval.max_new_tokens" in msg
    assert "'train.max_response_tokens' (128) must be below 'engine.max_model_len' (128)" in msg
    assert len(e.value.problems) == 5  # each once, though both methods share the train section


def test_wrong_section_type(raw):
    raw["data"] = [1, 2]
    with pytest.raises(ConfigError, match="data: expected a mapping"):
        parse_params(raw)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_params(tmp_path / "nope.yaml")
