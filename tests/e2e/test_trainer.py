"""The RL loop through the real vLLM engine and DeepSpeed, on a tiny model."""

import copy
import csv
import json
import math
from pathlib import Path

import pytest
from helpers import ALL_METHODS, mini_batch, needed_only, tiny_params

from rlvr.schema import ConfigError
from rlvr.settings.load import parse_params, with_methods
from rlvr.settings.methods import method_config, parse_recipe

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_model):
    from rlvr.data.prepare import prepare
    from rlvr.rollout.vllm_engine import RolloutEngine

    tmp = tmp_path_factory.mktemp("train")
    params = parse_params(tiny_params(tmp))
    prepare(params.data)
    # asleep during each update and woken by the push, as on a GPU (rlvr.rollout.vllm_engine)
    engine = RolloutEngine(str(tiny_model), max_model_len=512, kv_cache_gib=1, seed=0, sleep_mode=True)
    yield params, engine, tmp


@pytest.mark.parametrize("name", list(ALL_METHODS))
def test_two_steps_of_every_objective(setup, tiny_model, name):
    from rlvr.objectives.registry import objective
    from rlvr.training.trainer import Trainer

    params, engine, tmp = setup
    method = method_config(params, name)
    trainer = Trainer(params, method, str(tiny_model), tmp / "runs" / name, tmp / "models" / name, rollout_engine=engine)
    rows = trainer.train()
    assert [r["step"] for r in rows] == [1, 2]
    # every key the objective returns is recorded (DisCO's kl_active, GRPO's kl_ref, ...)
    hp = method.objective
    own = objective(hp.objective).loss(needed_only(mini_batch(), hp.needs()), hp).metrics.keys()
    for r in rows:
        for key in ("reward_mean", "entropy", "topp_entropy", "kl", "zero_variance_groups", "all_correct_groups",
                    "all_wrong_groups", "perplexity", "response_length",
                    "truncation_rate", "time_rollout", "time_update", "time_weight_push", "train_tokens_per_s",
                    "lr", *own):
            assert key in r and r[key] == r[key], key  # present and not NaN
        assert r["entropy"] > 0 and r["time_update"] > 0 and r["perplexity"] >= 1
    assert (tmp / "models" / name / "model.safetensors").exists()
    state = json.loads((tmp / "runs" / name / "checkpoint" / "trainer_state.json").read_text())
    assert state["step"] == 2 and state["data_position"] >= 4
    if hp.needs().anchor:
        assert state["entropy_anchor"] is not None and state["entropy_anchor"] >= 0
    with open(tmp / "runs" / name / "steps.csv") as f:
        assert [int(r["step"]) for r in csv.DictReader(f)] == [1, 2]


def _one_step(params, method, model, engine, run_dir, groups, full_old_pass: bool):
    """One update step on fixed rollouts; returns its metrics, the new weights and
    how many groups went through the separate pi_old pass."""
    import torch

    from rlvr.training.trainer import Trainer

    from rlvr.training.update import PolicyUpdate

    tr = Trainer(params, method, str(model), run_dir, run_dir / "final", rollout_engine=engine)
    tr.setup()
    try:
        if full_old_pass:  # every group's pi_old in a pass of its own, the first mini-batch's too
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(PolicyUpdate, "old_pass_rows", lambda self, first, pending: [r for mb in first for r in mb])
                row = tr.step(0, groups=copy.deepcopy(groups))
        else:
            row = tr.step(0, groups=copy.deepcopy(groups))
    finally:
        tr.verifier.close()
    weights = torch.cat([p.detach().float().flatten() for p in tr.ds_engine.module.parameters()])
    return row, weights, row["old_pass_groups"]


@pytest.fixture(scope="module")
def fixed_groups(setup, tiny_model, tmp_path_factory):
    """One step's rollouts, with a reward signal in every group whatever was sampled."""
    from rlvr.training.step_metrics import PhaseTimer
    from rlvr.training.trainer import Trainer

    params, engine, _ = setup
    tmp = tmp_path_factory.mktemp("probe")
    probe = Trainer(params, method_config(params, "grpo"), str(tiny_model), tmp / "run", tmp / "final", rollout_engine=engine)
    probe.setup()
    groups = probe.collector.collect(PhaseTimer()).groups
    probe.verifier.close()
    for g in groups:
        g.rewards[0] = 1.0 - g.rewards[-1]
    return groups


@pytest.mark.parametrize("name", ["grpo", "siren"])
def test_first_minibatch_takes_pi_old_from_its_own_forward(setup, tiny_model, tmp_path, fixed_groups, name):
    """Skipping the separate pi_old pass for the first mini-batch changes nothing:
    same loss, KL, entropies and weights as recomputing every group's old log-probs."""
    params, engine, _ = setup
    method = method_config(params, name)
    method.train.mini_batch_questions = 1  # two optimizer steps per rollout step
    fast, w_fast, seen_fast = _one_step(params, method, tiny_model, engine, tmp_path / "a", fixed_groups, False)
    full, w_full, seen_full = _one_step(params, method, tiny_model, engine, tmp_path / "b", fixed_groups, True)
    assert seen_full == 2 and seen_fast == (2 if name == "siren" else 1)  # SIREN's anchor needs every group
    for key in ("loss", "kl", "entropy", "topp_entropy", "clip_frac"):
        assert fast[key] == pytest.approx(full[key], rel=1e-4, abs=1e-6), key
    assert fast["kl"] != 0.0  # the second mini-batch really is off-policy
    assert (w_fast - w_full).abs().max().item() < 1e-6


def test_zero_stage_2_updates_like_stage_0(setup, tiny_model, tmp_path, fixed_groups):
    """ZeRO-2 (the multi-GPU recipes) and stage 0 (the one-process default) take
    the same optimizer steps (in fp32, where both accumulate gradients alike)."""
    params, engine, _ = setup
    runs = {}
    for stage in (0, 2):
        method = method_config(params, "grpo")
        method.train.zero_stage, method.train.bf16 = stage, False
        method.train.mini_batch_questions = 1  # two optimizer steps, the second one off-policy
        runs[stage] = _one_step(params, method, tiny_model, engine, tmp_path / f"z{stage}", fixed_groups, False)
    (row0, w0, _), (row2, w2, _) = runs[0], runs[2]
    assert row0["kl"] != 0 and row0["kl"] == pytest.approx(row2["kl"], rel=1e-3)
    assert (w0 - w2).abs().max().item() < 1e-6


@pytest.mark.parametrize("name", ["dr_grpo", "siren", "disco"])
def test_padding_free_calls_update_like_padded_ones(setup, tiny_model, tmp_path, fixed_groups, name):
    """train.padding_free: the same step (token-budget calls, two optimizer
    steps) with every call in one unpadded row as with padded calls."""
    params, engine, _ = setup
    runs = {}
    for flat in (False, True):
        method = method_config(params, name)
        method.train.mini_batch_questions, method.train.max_tokens_per_call = 1, 512
        method.train.padding_free = flat
        runs[flat] = _one_step(params, method, tiny_model, engine, tmp_path / f"f{flat}", fixed_groups, False)
    (padded, w_padded, _), (flat, w_flat, _) = runs[False], runs[True]
    assert flat["train_padded_tokens"] == flat["train_tokens"] <= padded["train_padded_tokens"]  # no padding at all
    for key in ("loss", "kl", "entropy", "topp_entropy"):
        assert flat[key] == pytest.approx(padded[key], rel=1e-4, abs=1e-6), key
    # Adam's first steps move a weight by about lr (1e-4) whatever its gradient's size, so summation-order
    # noise in a near-zero gradient shows up to a few percent of that: 1e-5, as tests/e2e/test_distributed.py
    assert (w_flat - w_padded).abs().max().item() < 1e-5


def test_training_changes_the_rollout_weights(setup, tiny_model):
    """The weight push really lands in vLLM: greedy output differs after a push of perturbed weights."""
    import torch
    from safetensors.torch import load_file

    _, engine, _ = setup
    weights = load_file(str(tiny_model / "model.safetensors"))
    prompt = ["Compute 1 + 1."]
    engine.load_weights(weights.items())
    before = engine.generate(prompt, n=1, temperature=0.0, top_p=1.0, max_tokens=8, progress=False)[0][0].token_ids
    torch.manual_seed(1)
    noisy = {k: v + 0.5 * torch.randn_like(v.float()).to(v.dtype) for k, v in weights.items()}
    engine.load_weights(noisy.items())
    after = engine.generate(prompt, n=1, temperature=0.0, top_p=1.0, max_tokens=8, progress=False)[0][0].token_ids
    engine.load_weights(weights.items())
    again = engine.generate(prompt, n=1, temperature=0.0, top_p=1.0, max_tokens=8, progress=False)[0][0].token_ids
    assert before != after and before == again


def test_method_config_errors(setup):
    params, _, _ = setup
    raw = tiny_params(Path("/tmp"))
    bad = copy.deepcopy(raw)
    bad["train"]["responses_per_question"] = 1
    bad["train"]["mini_batch_questions"] = 3
    bad["train"]["max_response_tokens"] = 4096
    bad["methods"]["grpo"]["objectve"] = "grpo"
    bad["methods"]["disco"]["form"] = "droo"
    with pytest.raises(ConfigError) as e:
        parse_recipe(bad)
    msg = str(e.value)
    for needle in ("'train.responses_per_question' must be >= 2", "must divide 'train.questions_per_step'",
                   "must be below 'engine.max_model_len'", "did you mean 'methods.grpo.objective'",
                   "did you mean 'dro'"):
        assert needle in msg, needle
    with pytest.raises(ConfigError, match="did you mean 'disco'"):
        method_config(params, "disko")


def test_changed_params_start_fresh(tmp_path, tiny_model, setup):
    from rlvr.training.trainer import Trainer

    params, engine, _ = setup
    method = method_config(params, "dr_grpo")
    method.train.steps = 1
    Trainer(params, method, str(tiny_model), tmp_path / "r", tmp_path / "m", rollout_engine=engine).train()
    method.train.lr = 5e-5
    method.train.steps = 2
    tr = Trainer(params, method, str(tiny_model), tmp_path / "r", tmp_path / "m", rollout_engine=engine)
    rows = tr.train()
    assert [r["step"] for r in rows] == [1, 2]  # not resumed from step 1


def test_non_finite_losses_are_skipped_then_stop_the_run(setup, tiny_model, tmp_path, request):
    import torch

    from rlvr.objectives.base import LossOutput
    from rlvr.objectives.policy_term import PolicyTermParams
    from rlvr.objectives.registry import register, unregister
    from rlvr.training.trainer import Trainer, TrainingStopped

    @register("nan_loss_for_a_test", PolicyTermParams, examples=({},))
    def nan_loss(batch, p):
        return LossOutput(batch.logp.sum() * float("nan"), {})

    request.addfinalizer(lambda: unregister("nan_loss_for_a_test"))

    params, engine, _ = setup
    params = with_methods(params, {"nan": {"objective": "nan_loss_for_a_test"}})
    method = method_config(params, "nan")
    method.train.steps = 5
    method.train.max_bad_steps = 2
    tr = Trainer(params, method, str(tiny_model), tmp_path / "r", tmp_path / "m", rollout_engine=engine)
    with pytest.raises(TrainingStopped, match="2 steps in a row had non-finite losses"):
        tr.train()
    with open(tmp_path / "r" / "steps.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(float(r["skipped_updates"])) for r in rows] == [2]  # both micro-batches of step 1 skipped
    state = json.loads((tmp_path / "r" / "checkpoint" / "trainer_state.json").read_text())
    assert state["step"] == 1  # the checkpoint written when stopping
    # weights never saw a NaN
    assert all(torch.isfinite(p).all() for p in tr.ds_engine.module.parameters())


def test_a_step_whose_grading_fails_ends_the_run_with_its_cause_and_the_checkpoint_kept(setup, tiny_model, tmp_path,
                                                                                      monkeypatch):
    """The grader fails in step 2's rollout: the step is dropped before its
    update, step 1 is checkpointed, and one TrainingFailed (exit status 4)
    names the cause and what was kept; the rerun resumes from step 1."""
    from rlvr.grading.pool import GradingFailed, Verifier
    from rlvr.stopping import TrainingFailed
    from rlvr.training.trainer import Trainer

    params, engine, _ = setup
    method = method_config(params, "grpo")
    method.train.checkpoint_every = 5
    grade, calls = Verifier.grade, []

    def failing_on_step_2(self, groups, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise GradingFailed("every response of the call timed out (verifier.group_timeout_s)")
        return grade(self, groups, *args, **kwargs)

    monkeypatch.setattr(Verifier, "grade", failing_on_step_2)
    tr = Trainer(params, method, str(tiny_model), tmp_path / "r", tmp_path / "m", rollout_engine=engine)
    with pytest.raises(TrainingFailed) as failed:
        tr.train()
    said = str(failed.value)
    assert said.startswith("grading failed during the rollout of step 2: the step was dropped before its update; "
                           "the checkpoint holds step 1; every response of the call timed out")
    assert failed.value.exit_status == 4
    assert json.loads((tmp_path / "r" / "checkpoint" / "trainer_state.json").read_text())["step"] == 1
    monkeypatch.setattr(Verifier, "grade", grade)
    again = Trainer(params, method, str(tiny_model), tmp_path / "r", tmp_path / "m", rollout_engine=engine)
    assert [r["step"] for r in again.train()] == [2]


def _validated_params(tmp_path, **train):
    """grpo for 4 steps, validated at each on 4 held-out problems, a checkpoint every 2; data prepared."""
    from rlvr.data.prepare import prepare

    raw = tiny_params(tmp_path, {"grpo": ALL_METHODS["grpo"]})
    raw["data"]["validation_size"] = 4
    raw["train"].update({"steps": 4, "eval_every": 1, "checkpoint_every": 2, **train})
    params = parse_params(raw)
    prepare(params.data)
    return params


def test_validation_keeps_only_the_best_snapshot(setup, tiny_model, tmp_path, monkeypatch):
    """Scores 0.5, 0.7, 0.6, 0.7 at steps 1-4: step 2 is the best (a tie keeps
    the earlier step); step 1's snapshot goes once the step-2 checkpoint holds
    the new best; the final model's directory lists step 2 and itself."""
    from rlvr.evaluation.evaluator import Evaluator
    from rlvr.training.outputs import RunOutputs
    from rlvr.training.trainer import Trainer

    _, engine, _ = setup
    params = _validated_params(tmp_path)
    scores, seen = iter([0.5, 0.7, 0.6, 0.7]), []

    def fake_evaluate(self, label):
        seen.append((label, sorted({name for name, _ in self.problems}), self.profile.k))
        return {"mean": {"avg@k": next(scores), "maj@k": 0.0, "pass@k": 1.0}}, [], []

    monkeypatch.setattr(Evaluator, "evaluate", fake_evaluate)
    snapshots_seen = []
    monkeypatch.setattr(RunOutputs, "prune_snapshots", lambda self, best, f=RunOutputs.prune_snapshots: (
        snapshots_seen.append(sorted(p.name for p in self.snapshots.root.glob("step_*"))), f(self, best))[1])
    run_dir, final = tmp_path / "runs/grpo", tmp_path / "models/grpo"
    rows = Trainer(params, method_config(params, "grpo"), str(tiny_model), run_dir, final, rollout_engine=engine).train()
    assert [r["val_avg@k"] for r in rows] == [0.5, 0.7, 0.6, 0.7]
    assert seen[0] == ("validate step 1", ["validation"], params.validation.k)
    assert snapshots_seen == [["step_000001", "step_000002"], ["step_000002"]]  # before each prune at checkpoints
    assert sorted(p.name for p in (run_dir / "snapshots").iterdir()) == ["step_000002"]
    listed = json.loads((final / "snapshots.json").read_text())
    assert [(s["step"], s["best"], s["validation"]) for s in listed] == [(2, True, 0.7), (4, False, 0.7)]
    linked, kept = final / "snapshots/step_000002/model.safetensors", run_dir / "snapshots/step_000002/model.safetensors"
    assert linked.stat().st_ino == kept.stat().st_ino  # a hard link: no second copy on disk
    state = json.loads((run_dir / "checkpoint/trainer_state.json").read_text())
    assert state["best"] == {"step": 2, "score": 0.7}


def test_the_papers_protocol_keeps_every_nth_snapshot_and_scores_each(setup, tiny_model, tmp_path, monkeypatch):
    """snapshot_every 1 over 4 steps, validation best at step 2: steps 1-3 are
    kept through every prune and listed (2 also as the best), the final model
    last; the evaluate path then scores each on the test sets."""
    from rlvr.evaluation.evaluator import Evaluator, run_evaluation
    from rlvr.training.trainer import Trainer

    _, engine, _ = setup
    params = _validated_params(tmp_path, snapshot_every=1)
    scores = iter([0.5, 0.7, 0.6, 0.7])
    real_evaluate = Evaluator.evaluate
    monkeypatch.setattr(Evaluator, "evaluate", lambda self, label: (
        {"mean": {"avg@k": next(scores), "maj@k": 0.0, "pass@k": 1.0}}, [], []) if label.startswith("validate")
        else real_evaluate(self, label))
    run_dir, final = tmp_path / "runs/grpo", tmp_path / "models/grpo"
    Trainer(params, method_config(params, "grpo"), str(tiny_model), run_dir, final, rollout_engine=engine).train()
    assert sorted(p.name for p in (run_dir / "snapshots").iterdir()) == ["step_000001", "step_000002", "step_000003"]
    listed = json.loads((final / "snapshots.json").read_text())
    assert [(s["step"], s["best"], s["protocol"]) for s in listed] == [
        (1, False, True), (2, True, True), (3, False, True), (4, False, True)]
    run_evaluation(final, params, tmp_path / "eval", rollout_engine=engine)
    by_step = json.loads((tmp_path / "eval/by_step.json").read_text())["steps"]
    assert sorted(by_step, key=int) == ["1", "2", "3", "4"] and all(e["protocol"] for e in by_step.values())


def test_a_resumed_run_keeps_the_best_its_checkpoint_names(setup, tiny_model, tmp_path, monkeypatch):
    """Killed after saving a new best (step 3) but before the checkpoint that
    would record it: the resumed run starts from step 2's checkpoint, whose
    best is step 2, deletes step 3's snapshot, and chooses afresh."""
    from rlvr.evaluation.evaluator import Evaluator
    from rlvr.training.outputs import RunOutputs
    from rlvr.training.trainer import Trainer

    _, engine, _ = setup
    params = _validated_params(tmp_path)
    scores = iter([0.5, 0.7, 0.9, 0.6, 0.8])  # the killed run's steps 1-3, then the resumed run's 3-4
    monkeypatch.setattr(Evaluator, "evaluate", lambda self, label: ({"mean": {"avg@k": next(scores)}}, [], []))
    save = RunOutputs.save_snapshot

    def killed_after_step_3(self, engine, step):
        save(self, engine, step)
        if step == 3:
            raise KeyboardInterrupt

    run_dir, final = tmp_path / "runs/grpo", tmp_path / "models/grpo"
    method = method_config(params, "grpo")
    monkeypatch.setattr(RunOutputs, "save_snapshot", killed_after_step_3)
    with pytest.raises(KeyboardInterrupt):
        Trainer(params, method, str(tiny_model), run_dir, final, rollout_engine=engine).train()
    assert sorted(p.name for p in (run_dir / "snapshots").iterdir()) == ["step_000002", "step_000003"]
    monkeypatch.setattr(RunOutputs, "save_snapshot", save)
    resumed = Trainer(params, method, str(tiny_model), run_dir, final, rollout_engine=engine)
    assert resumed.setup() == 2 and resumed.best == {"step": 2, "score": 0.7}
    assert sorted(p.name for p in (run_dir / "snapshots").iterdir()) == ["step_000002"]
    resumed.verifier.close()
    resumed.lock.release()  # set up, never trained: its run is free again
    Trainer(params, method, str(tiny_model), run_dir, final, rollout_engine=engine).train()
    listed = json.loads((final / "snapshots.json").read_text())
    assert [(s["step"], s["best"], s["validation"]) for s in listed] == [(4, True, 0.8)]
    assert list((run_dir / "snapshots").iterdir()) == []  # the final model is the best: no snapshot kept


THROWAWAY = '''
"""A throwaway objective: GRPO's policy term at half weight, with an entropy it reads."""
from dataclasses import dataclass

from rlvr.objectives.base import LossOutput, Needs
from rlvr.objectives.policy_term import PolicyTermParams, policy_term
from rlvr.objectives.registry import register


@dataclass
class HalvedParams(PolicyTermParams):
    weight: float = 0.5  # the policy term's weight

    def needs(self):
        return Needs(entropies=frozenset({"entropy"}))

    def check(self, where, problems):
        super().check(where, problems)
        if self.weight <= 0:
            problems.append(f"'{where}.weight' must be > 0")


@register("halved_grpo", HalvedParams, examples=({}, {"weight": 0.25}))
def halved_grpo(batch, p):
    if batch.entropy is None:  # asked for through needs()
        raise ValueError("halved_grpo reads the entropy")
    loss, metrics = policy_term(batch, p)
    return LossOutput(p.weight * loss, {**metrics, "halved_weight": loss.detach() * 0 + p.weight})
'''


def test_a_new_objective_is_one_module_and_a_params_entry(setup, tiny_model, tmp_path, monkeypatch, request):
    """An objective written in a package of its own trains without an edit to
    rlvr: its module registers it, the params entry names it, its settings
    are checked by its own dataclass and the trainer computes what it needs."""
    import importlib

    from rlvr.objectives.registry import unregister
    from rlvr.training.trainer import Trainer

    package = tmp_path / "extra_objectives"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "halved.py").write_text(THROWAWAY)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("extra_objectives.halved")
    request.addfinalizer(lambda: unregister("halved_grpo"))

    params, engine, _ = setup
    halved = {"objective": "halved_grpo", "weight": 0.25, "clip_high": 0.28}
    params = with_methods(params, {"halved": halved})
    method = method_config(params, "halved")
    assert (type(method.objective).__name__, method.objective.weight) == ("HalvedParams", 0.25)
    bad = with_methods(params, {"bad": {"objective": "halved_grpo", "weight": -1.0, "wieght": 1.0}})
    with pytest.raises(ConfigError) as e:
        method_config(bad, "bad")
    assert "'methods.bad.weight' must be > 0" in str(e.value) and "did you mean 'methods.bad.weight'" in str(e.value)

    method.train.steps = 1
    rows = Trainer(params, method, str(tiny_model), tmp_path / "r", tmp_path / "m", rollout_engine=engine).train()
    assert rows[0]["halved_weight"] == pytest.approx(0.25) and math.isfinite(rows[0]["loss"])
