"""Every paper recipe in params/: accepted as written, and a CPU dry run of its
real prepare -> train (2 steps, one snapshot) -> evaluate path on a tiny random
model of its architecture, the online loaders fed from data/vendor/hub."""

import dataclasses

import pytest
import torch
import yaml
from helpers import DRY_RUNS, REPO

from rlvr.objectives.base import ObjectiveParams, PolicyBatch
from rlvr.objectives.registry import objective, settings
from rlvr.rollout.groups import shaped_rewards
from rlvr.settings.load import load_params
from rlvr.settings.methods import method_config
from rlvr.settings.train import TrainParams

RECIPES = sorted((REPO / "params").glob("*.yaml"))
ROLLOUT_KEYS = {"incorrect_reward", "dynamic_sampling", "dynamic_sampling_rounds", "overlong_buffer"}
TRAIN_KEYS = {f for f in TrainParams.__dataclass_fields__}


def test_there_is_a_recipe_per_paper_table():
    names = {p.stem for p in RECIPES}
    assert {"disco_1.5b", "disco_7b", "disco_8b", "disco_1.5b_dapo_math", "siren_qwen2.5-math-7b",
            "siren_qwen2.5-math-1.5b", "siren_llama3.1-8b"} <= names


@pytest.mark.parametrize("recipe", [r for r in RECIPES if r.stem.startswith("disco")], ids=lambda p: p.stem)
def test_disco_table_rows_are_graded_as_the_disco_runs_were(recipe):
    """deepscaler_reward_fn gives 1 / 0 to every method of DisCO's table, DAPO's
    row too (its +1 / -1 is verl's DAPO recipe: only dapo_full, outside the table, keeps it)."""
    params = load_params(recipe)
    rewards = {name: method_config(params, name).train.incorrect_reward for name in params.methods}
    assert {n: r for n, r in rewards.items() if n != "dapo_full"} == {n: 0.0 for n in rewards if n != "dapo_full"}
    assert rewards.get("dapo_full", -1.0) == -1.0
    if "dapo" in rewards:
        assert method_config(params, "dapo").train.overlong_buffer == 1024  # DisCO's overlong_buffer_len


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_each_recipe_grades_as_its_paper(recipe):
    assert load_params(recipe).verifier.grader == ("deepscaler" if recipe.stem.startswith("disco") else "siren_official")


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_recipe_loads_unchanged(recipe):
    params = load_params(recipe)
    assert params.launcher.kind == "deepspeed" and params.launcher.world == 8
    for name in params.methods:
        method_config(params, name)


def fixed_batch(max_len: int = 4, spread: float = 2.0) -> PolicyBatch:
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(8, max_len, generator=g) * spread).requires_grad_()
    old = logp.detach() + 1.5 * torch.randn(8, max_len, generator=g)  # ratios up to e^3: the clips bind
    h = torch.rand(8, max_len, generator=g) * 2
    rewards = torch.tensor([1.0, 0, 0, 1, 0, 1, 0, 0])  # two groups of 4, several negatives each (DRO differs)
    return PolicyBatch(logp=logp, old_logp=old, mask=torch.ones(8, max_len), rewards=rewards,
                       group_size=4, max_response_len=max_len, entropy=(1.5 * h.flip(-1)).requires_grad_(),
                       topp_entropy=h.clone().requires_grad_(), entropy_anchor=0.4,
                       ref_logp=logp.detach() - 0.4 * torch.rand(8, max_len, generator=g))


def topp_value(hp: ObjectiveParams) -> float:
    """SIREN's nucleus settings act where the top-p entropy is computed (rlvr.training.policy), not in the loss."""
    from rlvr.training.entropy import topp_entropy

    logits = torch.linspace(0, 3, 12000)  # a flat tail: a 0.8 nucleus holds thousands of tokens
    return topp_entropy(logits, 1.0, hp.entropy_top_p, hp.entropy_top_k).item()


def perturbed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, str):
        return {"logl": "lratio", "lratio": "logl", "lratio_clipped": "lratio", "dro": "basic", "basic": "dro",
                "kl": "low_var_kl", "response": "batch", "penalty": "hinge", "full": "topp", "all": "peak",
                "peak_of_full": "peak"}.get(value)
    if isinstance(value, int):
        return value // 2 if value > 1 else value + 1
    return value * 0.5 if value else 0.5


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_every_objective_param_of_a_recipe_changes_the_loss(recipe):
    """A recipe setting the loss never reads would be silently wrong: each one
    (scaled by 0.5, or flipped) changes the loss on a fixed batch; the rollout
    settings change the rewards."""
    raw = yaml.safe_load(recipe.read_text())
    for name, entry in raw["methods"].items():
        base = settings(entry["objective"], **{k: v for k, v in entry.items() if k not in TRAIN_KEYS | {"objective"}})
        rollout = TrainParams(max_response_tokens=16, **{k: v for k, v in entry.items() if k in ROLLOUT_KEYS})
        for key, value in entry.items():
            if key in ("objective", "dynamic_sampling_rounds", "dynamic_sampling"):
                continue
            if key in ROLLOUT_KEYS:  # train settings of the rollout side: they change the rewards
                correct, lengths = [True, False, False], [4, 15, 16]
                changed = dataclasses.replace(rollout, **{key: perturbed(value)})
                assert shaped_rewards(correct, lengths, changed) != shaped_rewards(correct, lengths, rollout), \
                    (recipe.stem, name, key)
                continue
            if key in TRAIN_KEYS:
                continue
            changed = dataclasses.replace(base, **{key: perturbed(value)})
            if key in ("entropy_top_p", "entropy_top_k"):
                assert topp_value(changed) != pytest.approx(topp_value(base), rel=1e-9), (recipe.stem, name, key)
                continue
            # Token shares (Clip-Cov, KL-Cov 2e-4, 80/20 top 20%) need a large batch with log-probs as
            # spread as real ones: the loss must change on the small or on the large fixed batch.
            def loss_on(hp, batch):
                return objective(base.objective).loss(batch(), hp).loss.item()

            batches = (fixed_batch, lambda: fixed_batch(2500, spread=16.0))
            moved = [loss_on(changed, b) != pytest.approx(loss_on(base, b), rel=1e-9, abs=1e-12) for b in batches]
            assert any(moved), (recipe.stem, name, key, value)


# One dry run per distinct path: each paper's methods on each architecture. The three left out differ from
# one of these only in sizes, learning rate and model id (disco_7b, siren_qwen2.5-math-1.5b) or in the
# training set, whose loader test_data runs through the hub mirror (disco_1.5b_dapo_math); together they
# took 7.3 of the suite's minutes. `rlvr dryrun params/<file>` runs any of them.
@pytest.mark.parametrize("size, released", [
    ("1.5b", {"agentica-org/DeepScaleR-1.5B-Preview", "ganglii/DisCO-1.5B-logL", "ganglii/DisCO-1.5B-Lratio"}),
    ("7b", {"ganglii/DisCO-7B-logL", "ganglii/DisCO-7B-Lratio",
            "Xuerui2312/DeepSeek-R1-Distill-Qwen-7B-TRPA-DeepScaleR-verl0326"}),
])
def test_the_32k_profile_is_the_8k_recipe_at_32k_tokens_without_training(size, released):
    """DisCO's eval_model_32k.sh differs from eval_model_8k.sh only in response_length."""
    raw_a, raw_b = (yaml.safe_load((REPO / "params" / f"{n}.yaml").read_text())
                    for n in (f"disco_{size}_eval32k", f"disco_{size}"))
    # the 8k recipe evaluates DeepScaleR at 32k too (its DisCO comparison): the 32k profile has it as its own row
    assert raw_a["methods"] == {} and raw_a["checkpoints"] == {
        k: v for k, v in raw_b["checkpoints"].items() if not k.endswith("_32k")}
    assert all(v["eval"] == {"max_new_tokens": raw_a["eval"]["max_new_tokens"],
                             "max_model_len": raw_a["eval"]["max_model_len"]}
               for k, v in raw_b["checkpoints"].items() if k.endswith("_32k"))
    assert raw_a["eval"] == {**raw_b["eval"], "max_new_tokens": 32768, "max_model_len": 33792}
    assert {k: v for k, v in raw_a.items() if k not in ("methods", "eval", "checkpoints")} == \
        {k: v for k, v in raw_b.items() if k not in ("methods", "eval", "checkpoints")}
    assert set(raw_a["checkpoints"].values()) == released


def objectives_of(params) -> set[str]:
    return {m.objective for m in params.methods.values()}


def test_every_left_out_dry_run_has_a_twin():
    """A recipe left out runs the objectives, prompt and grader of its twin; the
    ablation recipes differ from theirs only in `methods:` (settings of the same
    objectives, each setting's path in the loss tested in test_objectives and
    test_siren_ablations) and `report:`."""
    twin = {"disco_1.5b": "disco_8b", "siren_llama3.1-8b": "siren_qwen2.5-math-7b",
            "disco_7b": "disco_1.5b", "disco_1.5b_dapo_math": "disco_1.5b", "siren_qwen2.5-math-1.5b":
            "siren_qwen2.5-math-7b", "disco_1.5b_ablations": "disco_1.5b",
            "siren_qwen2.5-math-7b_ablations": "siren_qwen2.5-math-7b", "disco_1.5b_eval32k": "disco_1.5b",
            "disco_7b_eval32k": "disco_7b", "siren_qwen2.5-math-7b_entropy_sweep": "siren_qwen2.5-math-7b"}
    smoked = "siren_qwen2.5-math-7b"  # its training path whole in tests/e2e/test_smoke_run.py; its graders' halves
    # through the pool in tests/grading; its objectives trained in tests/e2e/test_trainer.py
    assert {p.stem for p in RECIPES} == {p.stem for p in DRY_RUNS} | {smoked} | set(twin)
    for name, other in twin.items():
        a, b = (load_params(REPO / "params" / f"{n}.yaml") for n in (name, other))
        assert objectives_of(a) <= objectives_of(b)  # the same objectives, run in the twin
        assert a.prompt == b.prompt and a.verifier.grader == b.verifier.grader
        if name.endswith(("_ablations", "_entropy_sweep")):
            raw_a, raw_b = (yaml.safe_load((REPO / "params" / f"{n}.yaml").read_text()) for n in (name, other))
            assert {k: v for k, v in raw_a.items() if k not in ("methods", "report", "checkpoints")} == \
                {k: v for k, v in raw_b.items() if k not in ("methods", "report", "checkpoints")}
