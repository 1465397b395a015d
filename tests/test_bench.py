"""The benchmark's arithmetic and report, from fixed measurements."""

import sys

import pytest
import torch
from helpers import REPO

sys.path.insert(0, str(REPO / "bench"))

from parts import generated_lengths, op_kind, rl_step_times, time_by_kind  # noqa: E402
from render import ratios, render, rollout_budget, verdicts  # noqa: E402

MEASURED = {
    "command": "python bench/run.py",
    "work": {"questions": 4, "n": 8, "max_tokens": 128, "temperature": 0.7, "model": "models/base",
             "model_dtype": "float32"},
    "parts": {
        "rollout_vllm": {"engine": "vllm", "dtype": "float32", "tokens": 700, "seconds": 5.0,
                         "tokens_per_s": 140.0, "peak_rss_mib": 3000},
        "rollout_hf_float32": {"engine": "transformers_generate", "dtype": "float32", "tokens": 500,
                               "seconds": 10.0, "tokens_per_s": 50.0, "peak_rss_mib": 2000},
        "rollout_hf_bfloat16": {"engine": "transformers_generate", "dtype": "bfloat16", "tokens": 400,
                                "seconds": 10.0, "tokens_per_s": 40.0, "peak_rss_mib": 1500},
        "step_rlvr_grpo": {"framework": "rlvr", "method": "grpo", "step_seconds": [90.0, 80.0], "mean_step_s": 80.0,
                           "response_length": 100, "train_tokens_per_s": 120,
                           "phases_s": {"rollout": 30.0, "update": 40.0}},
        "step_trl_grpo": {"framework": "trl", "method": "grpo", "step_seconds": [200.0, 180.0], "mean_step_s": 180.0,
                          "response_length": 104},
        "repro": {"repro_full_s": 30 * 60.0, "repro_noop_s": 2.0},
    },
}


def test_ratios_come_from_the_measured_parts():
    q = ratios(MEASURED)
    assert q["rollout_speedup"] == pytest.approx(140 / 50)  # against the faster transformers precision
    assert q["step_speedup_grpo"] == pytest.approx(180 / 80)
    assert "step_speedup_disco_logl" not in q  # not measured: no ratio


def test_the_rollout_baseline_is_the_faster_transformers_precision():
    parts = {**MEASURED["parts"], "rollout_hf_bfloat16": {**MEASURED["parts"]["rollout_hf_bfloat16"],
                                                          "tokens_per_s": 70.0}}
    assert ratios({**MEASURED, "parts": parts})["rollout_speedup"] == pytest.approx(140 / 70)


def test_verdicts_against_the_targets():
    met = {name: ok for name, _, _, ok in verdicts(MEASURED)}
    assert met["rollout tokens/s vs transformers generate (float32)"] is False  # 2.8x < 6x
    assert met["RL step (grpo) vs TRL GRPOTrainer"] is True  # 2.25x >= 2x
    assert met["default `dvc repro` from scratch"] is False  # 30 min >= 25 min
    assert met["`dvc repro`, nothing changed"] is True


def test_render_shows_every_ratio_and_failure():
    md = render({**MEASURED, "failed": {"scaling": "killed"}})
    assert "| rollout tokens/s vs transformers generate (float32) | >= 6x | 2.80x | **no** |" in md
    assert "| transformers_generate | bfloat16 | 400 |" in md
    assert "| RL step (grpo) vs TRL GRPOTrainer | >= 2x | 2.25x | yes |" in md
    assert "| rlvr | grpo | 80.0 | 90.0, 80.0 |" in md
    assert "`scaling`: killed" in md
    assert "python bench/run.py" in md


def test_rl_step_times_group_updates_into_steps():
    # 2 updates per RL step; update ends at t = 3, 5 | 9, 10 | 14, 15
    assert rl_step_times(0.0, [3, 5, 9, 10, 14, 15], 2) == [5, 5, 5]
    assert rl_step_times(1.0, [3, 5, 9], 1) == [2, 2, 4]
    assert rl_step_times(0.0, [3], 2) == []  # an unfinished step is not a step


def test_generated_lengths_stop_at_the_first_eos():
    rows = torch.tensor([[5, 6, 2, 0, 0], [5, 6, 7, 8, 9], [2, 0, 0, 0, 0]])
    assert generated_lengths(rows, {2}) == [3, 5, 1]


def test_ops_are_grouped_by_kind():
    assert op_kind("_C::onednn_mm") == "matmul"
    assert op_kind("_C::cpu_attention_with_kv_cache") == "attention"
    assert op_kind("vllm::unified_kv_cache_update") == "attention"
    assert op_kind("_C::fused_gumbel_argmax") == "sampling"
    assert op_kind("aten::silu") == "other ops"


def test_time_by_kind_leaves_the_unaccounted_wall_time_to_python():
    ops = [("_C::onednn_mm", 4.0), ("aten::mm", 1.0), ("_C::cpu_attention_with_kv_cache", 1.5),
           ("_C::fused_gumbel_argmax", 0.5), ("aten::silu", 0.25), ("aten::copy_", 0.25)]
    kinds = time_by_kind(ops, wall_s=10.0)
    assert kinds == {"matmul": 5.0, "attention": 1.5, "sampling": 0.5, "other ops": 0.5,
                     "python and scheduling": 2.5}
    assert time_by_kind(ops, wall_s=7.0)["python and scheduling"] == 0.0  # never negative


PROFILED = {**MEASURED, "parts": {**MEASURED["parts"], "rollout_vllm_profile": {
    "engine": "vllm", "dtype": "float32", "seconds": 4.0, "tokens": 300, "decode_steps": 100,
    "seconds_by_kind": {"matmul": 1.0, "attention": 1.0, "sampling": 0.5, "other ops": 0.5,
                        "python and scheduling": 1.0}}}}


def test_rollout_budget_from_the_profiled_batch():
    b = rollout_budget(PROFILED)  # baseline: transformers float32, 50 tokens/s
    assert b["ceiling_speedup"] == pytest.approx(300 / 1.0 / 50)  # matmuls only: 300 tok/s
    assert b["matmul_ms"] == pytest.approx(10.0)
    assert b["other_ms"] == pytest.approx(30.0)
    # 6x = 300 tok/s -> 1.0 s for the batch, all of it matmul: nothing left for the rest
    assert b["other_budget_ms"] == pytest.approx(0.0)
    assert rollout_budget(MEASURED) is None  # not profiled


def test_render_shows_the_rollout_profile():
    md = render(PROFILED)
    assert "| matmul | 1.00 | 10.0 | 25% |" in md
    assert "| python and scheduling | 1.00 | 10.0 | 25% |" in md
    assert "cap the engine at 6.0x transformers generate" in md
    assert "the matmuls alone take too long" in md


def test_precision_arms_average_seeds_per_problem_and_compare_with_fp32():
    from precision import render as render_precision
    from precision import summarize

    def run(precision, steps, seed, problems):
        return {"precision": precision, "seed": seed, "steps": steps, "mean_step_s": 2.0 if precision == "bf16" else 4.0,
                "avg": sum(problems) / len(problems), "problems": problems}

    fp32 = [run("fp32", 10, 0, [1.0, 1.0, 0.5, 0.5] * 10), run("fp32", 10, 1, [1.0, 0.5, 0.5, 0.5] * 10)]
    bf16 = [run("bf16", 10, 0, [0.0, 0.0, 0.5, 0.0] * 10), run("bf16", 10, 1, [0.0, 0.5, 0.0, 0.0] * 10)]
    long = [run("bf16", 20, 0, [1.0, 1.0, 0.5, 0.5] * 10), run("bf16", 20, 1, [1.0, 0.5, 0.5, 0.5] * 10)]
    s = summarize(fp32 + bf16 + long)
    assert list(s["arms"]) == ["fp32, 10 steps", "bf16, 10 steps", "bf16, 20 steps"]
    a = s["arms"]["fp32, 10 steps"]
    assert a["avg"][0] == pytest.approx(0.6875) and a["seed_means"] == [0.75, 0.625]
    assert a["seed_sd"] == pytest.approx(0.0883883, rel=1e-5)  # |0.75 - 0.625| / sqrt(2)
    worse = s["vs_fp32"]["bf16, 10 steps"]
    assert worse["diff"][0] == pytest.approx(0.125 - 0.6875) and worse["verdict"] == "bf16 worse"
    same = s["vs_fp32"]["bf16, 20 steps"]  # identical problems: a zero-width interval at 0
    assert same["diff"] == pytest.approx((0.0, 0.0, 0.0)) and same["verdict"] == "not distinguishable at this scale"
    s.update(machine="test", method="grpo", base_dtype="float32")
    md = render_precision(s)
    assert "| bf16 | 20 | 0.688 [" in md and "| 2.0 | 40 |" in md
    assert "- bf16, 10 steps - fp32: over problems (paired, seed-averaged) -0.562 [" in md
    # over seeds: fp32 0.75, 0.625 against bf16 0.125, 0.125: Welch t with one degree of freedom
    d, lo, hi = worse["over_seeds"]
    assert d == pytest.approx(-0.5625) and hi - lo == pytest.approx(2 * 12.7062 * 0.0625, rel=1e-4)
    assert worse["verdict_over_seeds"] == "not distinguishable at this scale"  # 2 seeds: a wide interval
    assert "over seeds (Welch t on the seed means) -0.562 [-1.357, +0.232]: not distinguishable" in md


def test_gold_forms_counts_a_cleaning_that_changes_sirens_reward():
    """A $-delimited root parses as stored; cleaned to a bare \\frac{\\sqrt{3}}{2}
    it parses to nothing (math-verify 0.7), so SIREN's reward flips for it;
    5.0 and 5 are equal numbers to math-verify: changed, not flipped; 17 is
    left alone."""
    from gold_forms import compare

    from rlvr.data.records import Record

    records = [Record(id=str(i), problem="p", answer=a, source="openr1_math")
               for i, a in enumerate(["$\\frac{\\sqrt{3}}{2}$", "5.0", "17"])]
    counts = compare(records)
    assert (counts["rows"], counts["changed"], counts["flipped"]) == (3, 2, 1)
    assert counts["examples"] == [("$\\frac{\\sqrt{3}}{2}$", "\\frac{\\sqrt{3}}{2}", [True, True], [False, False])]


def test_sirens_training_gold_is_kept_as_stored():
    import dataclasses

    from rlvr.data.sources import normalize
    from rlvr.settings.datasets import REGISTERED

    rows = [{"prompt": [{"role": "user", "content": "q"}], "reward_model": {"ground_truth": "$5.0$"}}]
    entry = REGISTERED["openr1_math"]
    kept = normalize(rows, entry)
    cleaned = normalize(rows, dataclasses.replace(entry, gold="clean"))
    assert (kept[0].answer, cleaned[0].answer) == ("$5.0$", "5")
