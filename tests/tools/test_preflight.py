"""The first stage, check_params: every problem of a params file in one report,
before DVC removes any output, including the models that do not resolve here."""

import subprocess
import sys
import time

import pytest
import yaml
from helpers import REPO, clean_env

from rlvr.schema import ConfigError
from rlvr.tools.preflight import check_recipe, source_problem

# Eleven problems a user could plant at once: (where, the path into params.yaml, the bad value, what the
# report must say about it).
PLANTED = [
    ("a typo in a key", ("eval", "temprature"), 0.5, "did you mean 'eval.temperature'"),
    ("a typo in a method's key", ("methods", "grpo", "objectve"), "grpo", "did you mean 'methods.grpo.objective'"),
    ("an unknown objective", ("methods", "disco_logl", "objective"), "disko", "did you mean 'disco'"),
    ("a negative learning rate", ("train", "lr"), -1e-6, "'train.lr' must be > 0"),
    ("a sample count no engine holds", ("eval", "k"), 100000, "'eval.k' must be in [1, 1024]"),
    ("a model path that does not exist", ("model", "source"), "models/nowhere", "models/nowhere is not a local"),
    ("an unknown benchmark", ("data", "benchmarks"), ["math5000"], "did you mean 'math500'"),
    ("one response per question", ("train", "responses_per_question"), 1, "'train.responses_per_question' must be >= 2"),
    ("no steps", ("train", "steps"), 0, "'train.steps' must be >= 1"),
    ("a response longer than the context", ("train", "max_response_tokens"), 10**6, "must be below 'engine.max_model_len'"),
    ("a sampling share out of range", ("eval", "top_p"), 1.5, "'eval.top_p' must be in (0, 1]"),
]


def _plant(raw: dict) -> dict:
    for _, path, value, _ in PLANTED:
        node = raw
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return raw


def test_every_planted_problem_is_reported_in_one_error(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(_plant(yaml.safe_load((REPO / "params.yaml").read_text()))))
    with pytest.raises(ConfigError) as e:
        check_recipe(path)
    text = str(e.value)
    missing = [what for what, _, _, said in PLANTED if said not in text]
    assert not missing, f"not reported: {missing}\n{text}"
    assert len(PLANTED) == 11


def test_the_stage_stops_with_the_list_before_any_compute(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(_plant(yaml.safe_load((REPO / "params.yaml").read_text()))))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(REPO / "stages/check_params.py")], cwd=tmp_path, capture_output=True,
                         text=True, env=clean_env(DVC_STAGE="check_params"), timeout=300)
    took = time.perf_counter() - t0
    assert out.returncode == 2, out.stderr[-2000:]
    assert all(said in out.stderr for *_, said in PLANTED) and "Traceback" not in out.stderr
    assert "dvc checkout --force check_params" in out.stderr
    assert not (tmp_path / "runs/params.checked").exists()
    print(f"11 planted problems reported by check_params in {took:.1f} s")


def test_the_default_params_pass_and_the_output_never_changes(tmp_path):
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    for _ in range(2):
        out = subprocess.run([sys.executable, str(REPO / "stages/check_params.py")], cwd=tmp_path, capture_output=True,
                             text=True, env=clean_env(), timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        if _ == 0:
            first = (tmp_path / "runs/params.checked").read_bytes()
    assert (tmp_path / "runs/params.checked").read_bytes() == first


def test_model_sources_resolve_here(tmp_path, monkeypatch, tiny_model):
    assert source_problem("model.source", "smollm2") is None
    assert source_problem("model.source", str(tiny_model)) is None
    assert "has no config.json" in source_problem("model.source", str(tmp_path))
    assert "nor a hub id" in source_problem("checkpoints.x", "./gone/model")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))  # an empty cache
    said = source_problem("checkpoints.x", "agentica-org/DeepScaleR-1.5B-Preview")
    assert "not in the local Hugging Face cache" in said and "hf download" in said
    (tmp_path / "hf" / "models--agentica-org--DeepScaleR-1.5B-Preview" / "snapshots" / "abc").mkdir(parents=True)
    (tmp_path / "hf" / "models--agentica-org--DeepScaleR-1.5B-Preview" / "snapshots" / "abc" / "config.json").write_text("{}")
    (tmp_path / "hf" / "models--agentica-org--DeepScaleR-1.5B-Preview" / "refs").mkdir()
    (tmp_path / "hf" / "models--agentica-org--DeepScaleR-1.5B-Preview" / "refs" / "main").write_text("abc")
    assert source_problem("checkpoints.x", "agentica-org/DeepScaleR-1.5B-Preview") is None  # cached: resolves offline


def test_on_a_gpu_node_a_method_that_cannot_fit_is_a_problem_before_any_stage(tmp_path, monkeypatch):
    """rlvr.tools.memory's check per method, given each method as built (a no-op without CUDA, so a GPU
    and its error are stood in for here)."""
    import torch

    from rlvr.tools import memory

    def too_big(params, method):
        if method.name == "grpo" and method.loss is not None:
            raise ConfigError([f"methods.{method.name}: needs 90.0 GiB of 79.2; train.max_tokens_per_call: 8192 "
                               "fits"], "memory")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(memory, "check_this_gpu", too_big)
    path = tmp_path / "params.yaml"
    path.write_text((REPO / "params.yaml").read_text())
    with pytest.raises(ConfigError, match="methods.grpo: needs 90.0 GiB.*max_tokens_per_call: 8192 fits"):
        check_recipe(path)
