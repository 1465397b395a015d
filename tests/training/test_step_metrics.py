"""Per-step metrics on hand values: the difficulty shares of the step's groups
(DisCO's solve_all / solve_none) and the perplexity of the sampled responses."""

import math

import pytest
import torch

from rlvr.data.records import Record
from rlvr.rollout.groups import Group
from rlvr.training.step_metrics import StepMetrics
from rlvr.training.entropy import EntropyMeter, response_perplexity


def group(correct: list[bool]) -> Group:
    n = len(correct)
    return Group(Record(id="q", problem="1 + 1", answer="2", source="test"), [1, 2], [[5, 6]] * n, [False] * n, [float(c) for c in correct], correct)


def test_all_correct_and_all_wrong_shares_of_the_steps_groups():
    m = StepMetrics()
    m.add_groups([group([True, True]), group([False, False]), group([False, False]), group([True, False])])
    row = m.reduce()
    assert row["all_correct_groups"] == pytest.approx(0.25)
    assert row["all_wrong_groups"] == pytest.approx(0.5)
    assert row["zero_variance_groups"] == pytest.approx(0.75)  # either kind: no group signal


def test_response_perplexity_is_exp_of_the_mean_negative_log_prob():
    logp = torch.tensor([[math.log(0.5), math.log(0.25)], [math.log(0.1), 3.0]])  # row 1's second token: padding
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    ppl = response_perplexity(logp, mask)
    assert ppl.tolist() == pytest.approx([math.sqrt(8.0), 10.0])
    assert response_perplexity(torch.zeros(1, 2), torch.zeros(1, 2)).item() == 1.0  # empty: no surprise


def test_the_step_reports_the_mean_perplexity_over_responses():
    meter = EntropyMeter()
    out = {"logp": torch.tensor([[math.log(0.5)], [math.log(0.25)]]), "entropy": torch.ones(2, 1),
           "topp_entropy": torch.ones(2, 1)}
    meter.add(out, torch.ones(2, 1), 2)
    meter.add({k: v[:1] for k, v in out.items()}, torch.ones(1, 1), 1)
    m = StepMetrics()
    m.add("perplexity", meter.perplexity_sum, meter.responses)
    assert m.reduce()["perplexity"] == pytest.approx((2 + 4 + 2) / 3)
