import copy

import pytest
import yaml

from rlvr.config import ConfigError, load_params, parse_params, resolve_auto


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
    bad["eval"]["max_new_tokens"] = 128  # stated here, not taken from the defaults: both collide with 128
    bad["train"]["max_response_tokens"] = 128
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


def test_cpu_flags_parse_the_flags_line():
    from rlvr.hardware import cpu_flags

    info = "processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 avx512_bf16\n"
    assert cpu_flags(info) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags("processor: 0\n") == set()


def test_onednn_isa_cap_decides_whether_bf16_units_count():
    from rlvr.hardware import isa_allows_bf16

    assert isa_allows_bf16(None) and isa_allows_bf16("")
    assert not isa_allows_bf16("AVX2") and not isa_allows_bf16("avx512_core_vnni")  # AVX-512 without bf16
    assert isa_allows_bf16("AVX512_CORE_BF16") and isa_allows_bf16("avx512_core_amx") and isa_allows_bf16("DEFAULT")
    with pytest.raises(ValueError, match="'AVX3' is not a oneDNN ISA"):
        isa_allows_bf16("AVX3")


@pytest.mark.parametrize("fast, dtype", [(True, "bfloat16"), (False, "float32")])
def test_auto_precision_follows_the_hardware(monkeypatch, fast, dtype):
    import rlvr.hardware as hw

    monkeypatch.setattr(hw, "has_fast_bf16", lambda: fast)
    raw = {"model": {"dtype": "auto"}, "train": {"bf16": "auto"}}
    resolved = resolve_auto(raw)
    assert resolved["model"]["dtype"] == ("bfloat16" if fast else "float32") == dtype
    assert resolved["train"]["bf16"] is fast
    assert raw["model"]["dtype"] == "auto"  # the caller's dict is untouched
    explicit = resolve_auto({"model": {"dtype": "float16"}, "train": {"bf16": False}})
    assert explicit == {"model": {"dtype": "float16"}, "train": {"bf16": False}}
