"""CallPlan: the one answer to how a mini-batch is cut into loss calls, by hand."""

import ast

import pytest
from helpers import REPO

from rlvr.settings.call_plan import CallPlan
from rlvr.settings.train import TrainParams

DISCO = dict(responses_per_question=8, sequences_per_call=4, mini_batch_questions=8, questions_per_step=8)


@pytest.mark.parametrize("world,needs_groups,rows", [
    (8, True, 4),   # the official run: 4 per GPU, the 8 GPUs' calls hold 4 whole groups
    (1, True, 8),   # one GPU: one whole group per call
    (2, True, 4),   # 2 x 4 = 8: one group over the two ranks
    (3, True, 8),   # 3 x 4 = 12 splits a group; 3 x 8 = 24 holds three
    (3, False, 4),  # an objective that never compares a group keeps the setting
])
def test_rows_hold_whole_groups_over_the_ranks(world, needs_groups, rows):
    plan = CallPlan(TrainParams(**DISCO), world, needs_groups)
    assert plan.rows == rows and plan.most_rows == rows and plan.shared
    assert plan.gathered == (world > 1) and not plan.by_tokens


def test_whole_questions_and_token_bins():
    by_questions = CallPlan(TrainParams(micro_batch_questions=2, responses_per_question=4), world=1)
    assert (by_questions.rows, by_questions.most_rows, by_questions.by_tokens) == (0, 8, False)
    assert by_questions.whole_groups and not by_questions.shared and not by_questions.gathered
    bins = CallPlan(TrainParams(max_tokens_per_call=512), world=1)
    assert bins.by_tokens and not bins.whole_groups
    assert CallPlan(TrainParams(max_tokens_per_call=512), world=1, needs_groups=True).whole_groups
    # a mini-batch of fewer questions than ranks: the ranks share its responses
    assert CallPlan(TrainParams(mini_batch_questions=2, max_tokens_per_call=512), world=4).shared


def test_no_other_module_sizes_a_loss_call():
    """The settings that size a call are read for that by CallPlan alone: the
    update, the rollout groups and the memory budget ask it (the settings'
    checks and the smoke's recipe adjustment name the keys in their messages)."""
    readers = {str(f.relative_to(REPO / "src" / "rlvr")) for f in (REPO / "src" / "rlvr").rglob("*.py")
               if any(isinstance(n, ast.Attribute) and n.attr == "sequences_per_call"
                      for n in ast.walk(ast.parse(f.read_text())))}
    assert readers <= {"settings/call_plan.py", "settings/train_rules.py", "tools/memory.py"}, readers
