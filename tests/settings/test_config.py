import copy

import pytest
import yaml
from helpers import REPO

from rlvr.schema import ConfigError
from rlvr.settings.load import resolve_auto
from rlvr.settings.methods import load_recipe, parse_recipe


@pytest.fixture
def raw(repo):
    return yaml.safe_load((repo / "params.yaml").read_text())


def test_default_params_load(repo):
    p = load_recipe(repo / "params.yaml")
    assert p.eval.k >= 1 and p.data.source == "offline"


def test_unknown_key_suggests_closest(raw):
    raw["eval"]["temprature"] = 0.5
    with pytest.raises(ConfigError, match="did you mean 'eval.temperature'"):
        parse_recipe(raw)


def test_every_problem_reported_at_once(raw):
    bad = copy.deepcopy(raw)
    bad["eval"]["k"] = "four"
    bad["data"]["benchmarks"] = ["math500", "amc2"]
    bad["engine"]["max_model_len"] = 128
    bad["eval"]["max_new_tokens"] = 128  # stated here, not taken from the defaults: both collide with 128
    bad["train"]["max_response_tokens"] = 128
    bad["verfier"] = {}
    with pytest.raises(ConfigError) as e:
        parse_recipe(bad)
    msg = str(e.value)
    assert "'eval.k' must be int" in msg
    assert "did you mean 'amc23'" in msg
    assert "did you mean 'verifier'" in msg
    assert "eval.max_new_tokens" in msg
    assert "'train.max_response_tokens' (128) must be below 'engine.max_model_len' (128)" in msg
    assert len(e.value.problems) == 5  # each once, though both methods share the train section


def test_evaluation_may_have_its_own_context(raw):
    """SIREN's Llama evaluation: 32,768 new tokens, while training's engine keeps 4,096."""
    long = copy.deepcopy(raw)
    long["engine"]["max_model_len"] = 4096
    long["eval"]["max_new_tokens"] = 32768
    with pytest.raises(ConfigError, match="'eval.max_new_tokens' \\(32768\\) leaves no room .* 'engine.max_model_len'"):
        parse_recipe(long)
    long["eval"]["max_model_len"] = 32768
    with pytest.raises(ConfigError, match="within 'eval.max_model_len' \\(32768\\)"):
        parse_recipe(long)
    long["eval"]["max_model_len"] = 33792
    params = parse_recipe(long)
    assert (params.eval.max_model_len, params.engine.max_model_len) == (33792, 4096)


def test_wrong_section_type(raw):
    raw["data"] = [1, 2]
    with pytest.raises(ConfigError, match="data: expected a mapping"):
        parse_recipe(raw)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_recipe(tmp_path / "nope.yaml")


def test_cpu_flags_parse_the_flags_line():
    from rlvr.settings.hardware import cpu_flags

    info = "processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 avx512_bf16\n"
    assert cpu_flags(info) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags("processor: 0\n") == set()


def test_onednn_isa_cap_decides_whether_bf16_units_count():
    from rlvr.settings.hardware import isa_allows_bf16

    assert isa_allows_bf16(None) and isa_allows_bf16("")
    assert not isa_allows_bf16("AVX2") and not isa_allows_bf16("avx512_core_vnni")  # AVX-512 without bf16
    assert isa_allows_bf16("AVX512_CORE_BF16") and isa_allows_bf16("avx512_core_amx") and isa_allows_bf16("DEFAULT")
    with pytest.raises(ValueError, match="'AVX3' is not a oneDNN ISA"):
        isa_allows_bf16("AVX3")


@pytest.mark.parametrize("fast, dtype", [(True, "bfloat16"), (False, "float32")])
def test_auto_precision_follows_the_hardware(monkeypatch, fast, dtype):
    import rlvr.settings.hardware as hw

    monkeypatch.setattr(hw, "has_fast_bf16", lambda: fast)
    raw = {"model": {"dtype": "auto"}, "train": {"bf16": "auto"}}
    resolved = resolve_auto(raw)
    assert resolved["model"]["dtype"] == ("bfloat16" if fast else "float32") == dtype
    assert resolved["train"]["bf16"] is fast
    assert raw["model"]["dtype"] == "auto"  # the caller's dict is untouched
    explicit = resolve_auto({"model": {"dtype": "float16"}, "train": {"bf16": False}})
    assert explicit == {"model": {"dtype": "float16"}, "train": {"bf16": False}}


RECIPES = sorted((REPO / "params").glob("*.yaml"))


@pytest.mark.parametrize("ranks", [1, 8])
@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_validates_on_one_gpu_and_one_node(recipe, ranks):
    from rlvr.settings.methods import method_config

    raw = yaml.safe_load(recipe.read_text())
    raw["launcher"].update({"procs_per_node": ranks, "nodes": 1, "kind": "deepspeed" if ranks > 1 else "python"})
    params = parse_recipe(raw)
    for name in raw["methods"]:
        method_config(params, name)  # raises ConfigError, listing every problem


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_validates_on_two_nodes(recipe, tmp_path):
    from rlvr.settings.methods import method_config

    raw = yaml.safe_load(recipe.read_text())
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("node-a slots=8\nnode-b slots=8\n")
    raw["launcher"].update({"procs_per_node": 8, "nodes": 2, "kind": "deepspeed", "hostfile": str(hostfile)})
    params = parse_recipe(raw)
    for name in raw["methods"]:
        method_config(params, name)


def test_a_token_budget_below_one_item_is_reported(raw):
    raw = copy.deepcopy(raw)
    raw["train"]["max_tokens_per_call"] = 10
    raw["methods"] = {"g": {"objective": "grpo"}, "d": {"objective": "disco"}}
    with pytest.raises(ConfigError) as e:
        parse_recipe(raw)
    text = str(e.value)
    assert "'methods.g': train.max_tokens_per_call (10) must hold one sequence" in text
    assert "'methods.d': train.max_tokens_per_call (10) must hold a whole group" in text


def test_a_mini_batch_smaller_than_the_ranks_needs_response_shares(raw):
    raw = copy.deepcopy(raw)
    raw["launcher"].update({"procs_per_node": 4, "kind": "deepspeed"})
    raw["train"].update({"questions_per_step": 8, "mini_batch_questions": 2, "max_tokens_per_call": 2048})
    raw["engine"]["max_model_len"] = 256
    raw["methods"] = {"g": {"objective": "grpo"}, "d": {"objective": "disco"}}
    with pytest.raises(ConfigError) as e:
        parse_recipe(raw)
    text = str(e.value)
    assert "'methods.d': train.mini_batch_questions (2) must be a multiple of the number of ranks (4" in text
    assert "methods.g" not in text  # grpo shares the responses: 2 x 8 over 4 ranks


def test_validation_needs_a_held_out_split_and_a_sane_profile(raw):
    bad = copy.deepcopy(raw)
    bad["train"]["eval_every"] = 5
    bad["data"]["arithmetic"]["n_validation_per_level"] = 0
    bad["sweep"]["grid"] = {}
    bad["validation"].update({"k": 0, "max_new_tokens": 10**6})
    with pytest.raises(ConfigError) as e:
        parse_recipe(bad)
    text = str(e.value)
    assert "set data.validation_size" in text and "'validation.k' must be in [1, 1024]" in text
    bad = copy.deepcopy(raw)
    bad["train"]["eval_every"] = 5
    bad["data"]["arithmetic"]["n_validation_per_level"] = 0
    bad["data"]["validation_size"] = 16
    assert parse_recipe(bad).data.validation_size == 16
    bad["data"].update(validation_size=0, train_sets=["math_train"])  # arithmetic's own split only when trained on
    bad["data"]["arithmetic"]["n_validation_per_level"] = 8
    with pytest.raises(ConfigError, match="set data.validation_size"):
        parse_recipe(bad)


def test_a_sweep_gives_every_method_the_same_budget_of_valid_configurations(raw):
    bad = copy.deepcopy(raw)
    bad["sweep"]["grid"] = {"grpo": {"lr": [1e-5, 3e-5]}, "siren": {"entropy_coef": [0.01]},
                            "disco_logl": {"delta": [-1.0, 1e-3]}, "dpo": {"lr": [1e-5]}}
    with pytest.raises(ConfigError) as e:
        parse_recipe(bad)
    text = str(e.value)
    assert "'sweep.grid' has unknown method 'dpo'" in text
    assert "sweep.grid.disco_logl {'delta': -1.0}: 'methods.disco_logl.delta' must be >= 0" in text
    assert "'sweep.grid' gives the methods different budgets ({'grpo': 2, 'siren': 1, 'disco_logl': 2, 'dpo': 1})" \
        in text
    from rlvr.tools.sweep import configurations

    good = parse_recipe(raw)
    configs = configurations(good)
    per_method = {m: sum(c.method == m for c in configs) for m in good.sweep.grid}
    assert len(set(per_method.values())) == 1 and set(per_method) == set(good.methods)
    assert configs[0].command()[-1] == f"train@{configs[0].method}-{good.sweep.seed}"
    assert f"++methods.{configs[0].method}.eval_every={configs[0].steps}" in configs[0].command()


def test_checkpoints_and_ablations_name_what_they_refer_to(raw):
    """`checkpoints:` names apart from the methods and the base model, each a
    source; `report.ablations` pairs of trained methods: all reported at once."""
    bad = copy.deepcopy(raw)
    bad["checkpoints"] = {"grpo": "some/model", "base": "other/model", "released": None}
    bad["report"]["ablations"] = {"siren_wo_anchor": "siren", "grpo": "sirne"}
    with pytest.raises(ConfigError) as e:
        parse_recipe(bad)
    text = str(e.value)
    assert "'checkpoints.grpo': the name is taken by a method" in text
    assert "'checkpoints.base': the name is taken by the base model" in text
    assert "'checkpoints.released': expected a hub id or a local directory, got None" in text
    assert "unknown method 'siren_wo_anchor'" in text and "unknown method 'sirne' (did you mean 'siren'?)" in text
    good = copy.deepcopy(raw)
    good["checkpoints"] = {"released": "org/model"}
    good["report"]["ablations"] = {"grpo": "siren"}
    assert parse_recipe(good).checkpoints == {"released": "org/model"}


def test_a_released_model_may_be_evaluated_with_its_own_eval(raw):
    """{source, eval}: that model's evaluation changes only the keys it names
    (the paper's 32k row beside an 8k recipe); the others keep eval:; its bad
    keys, ranges and lengths are named where written, all at once."""
    good = copy.deepcopy(raw)
    good["checkpoints"] = {"at8k": "org/model", "at32k": {"source": "org/model",
                                                          "eval": {"max_new_tokens": 32768, "max_model_len": 33792}}}
    params = parse_recipe(good)
    assert params.checkpoints == {"at8k": "org/model", "at32k": "org/model"}
    own = params.evaluated_as("at32k").eval
    assert (own.max_new_tokens, own.max_model_len, own.k) == (32768, 33792, params.eval.k)
    assert params.evaluated_as("at8k") is params and params.evaluated_as("grpo") is params
    bad = copy.deepcopy(raw)
    bad["checkpoints"] = {"a": {"source": "org/model", "eval": {"max_new_token": 5}},
                          "b": {"source": "org/model", "eval": {"k": 0}},
                          "c": {"source": "org/model", "eval": {"max_new_tokens": 10**6}},
                          "d": {"eval": {}, "revision": "main"}}
    with pytest.raises(ConfigError) as e:
        parse_recipe(bad)
    text = str(e.value)
    assert "unknown key 'checkpoints.a.eval.max_new_token' (did you mean 'checkpoints.a.eval.max_new_tokens'?)" in text
    assert "'checkpoints.b.eval.k' must be in [1, 1024], got 0" in text
    assert "'checkpoints.c.eval.max_new_tokens' (1000000) leaves no room for the prompt" in text
    assert "'checkpoints.d': unknown key(s) ['revision']" in text
    assert "'checkpoints.d': expected a hub id or a local directory, got None" in text


def test_a_checkpoint_hub_id_offline_is_a_clear_error(raw, monkeypatch):
    from rlvr.evaluation.evaluator import model_source
    from rlvr.runs import Run

    raw["checkpoints"] = {"released": "org/not-here"}
    params = parse_recipe(raw)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="'checkpoints.released': 'org/not-here' is neither a local directory"):
        model_source(params, Run("released", external=True))
    assert str(model_source(params, Run("grpo", 0))) == "models/grpo/seed0"
    with pytest.raises(ConfigError, match="did you mean 'released'"):
        model_source(params, Run("releasd", external=True))


def test_the_evaluate_stage_scores_a_released_model_with_its_own_eval(raw, monkeypatch):
    from rlvr.evaluation import evaluator
    from rlvr.runs import Run
    from rlvr.tracking import tracker

    raw["checkpoints"] = {"at32k": {"source": "org/model", "eval": {"max_new_tokens": 32768,
                                                                    "max_model_len": 33792}}}
    params = parse_recipe(raw)
    seen = []

    class Evaluated(Exception):
        pass

    def run_evaluation(model, p, out_dir):
        seen.append((str(model), p.eval.max_new_tokens, p.eval.max_model_len))
        raise Evaluated

    monkeypatch.setattr(evaluator, "run_evaluation", run_evaluation)
    monkeypatch.setattr(tracker.Tracker, "for_stage", classmethod(lambda cls, *a, **k: tracker.NullTracker()))
    for run in (Run("at32k", external=True), Run("grpo", 0)):
        with pytest.raises(Evaluated):
            evaluator.evaluate_stage(params, run)
    assert seen == [("org/model", 32768, 33792), ("models/grpo/seed0", params.eval.max_new_tokens,
                                                  params.eval.max_model_len)]
