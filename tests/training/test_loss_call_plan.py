"""rlvr.training.loss_calls: cutting a rank's share of a mini-batch into loss calls."""

import pytest

from rlvr.rollout.groups import Group
from rlvr.settings.call_plan import CallPlan
from rlvr.settings.train import TrainParams
from rlvr.training.loss_calls import fill_bins, padded_tokens, plan_calls, rows_of, split_to


def group(prompt_len: int, lengths: list[int]) -> Group:
    n = len(lengths)
    return Group(None, list(range(prompt_len)), [[7] * k for k in lengths], [False] * n, [0.0] * n, [False] * n)


def test_padded_tokens_counts_what_the_forward_pass_sees():
    g, h = group(5, [3, 10]), group(8, [2])
    # left-padded to the longest prompt (8), right-padded to the longest response (10)
    assert padded_tokens([(g, 0), (g, 1), (h, 0)]) == 3 * (8 + 10)
    assert padded_tokens([]) == 0


def test_bins_stay_in_the_budget_and_group_similar_lengths():
    g = group(4, [60, 2, 58, 3, 30, 4, 31, 1])
    bins = fill_bins([[r] for r in rows_of([g])], budget=140)
    assert all(padded_tokens([r for item in b for r in item]) <= 140 for b in bins)
    assert sorted(i for b in bins for item in b for _, i in item) == list(range(8))  # every row once
    # longest first, each bin filled while rows x (4 + longest) <= 140: [60 58] (128), then
    # [31 30 4 3] (4 x 35 = 140), then [2 1]
    assert [[i for item in b for _, i in item] for b in bins] == [[0, 2], [6, 4, 5, 3], [1, 7]]


def test_an_item_over_the_budget_is_an_error():
    with pytest.raises(ValueError, match="exceeds train.max_tokens_per_call"):
        fill_bins([rows_of([group(4, [50, 50])])], budget=60)


def test_split_to_makes_exactly_k_calls_and_keeps_every_row():
    g = group(2, [5, 5, 5, 5])
    bins = fill_bins([[r] for r in rows_of([g])], budget=100)
    assert len(bins) == 1
    more = split_to(bins, 3)
    assert len(more) == 3 and sorted(i for b in more for it in b for _, i in it) == [0, 1, 2, 3]
    single = split_to(fill_bins([[(g, 0)]], budget=100), 3)  # nothing left to split: empty calls
    assert [len(b) for b in single] == [1, 0, 0]


def test_plan_calls_whole_groups_or_single_responses():
    groups = [group(3, [9, 1, 8, 2]), group(6, [4, 4, 4, 4])]
    legacy = plan_calls(rows_of(groups), CallPlan(TrainParams(micro_batch_questions=1)))
    assert [[i for _, i in call] for call in legacy] == [[0, 1, 2, 3]] * 2
    whole = plan_calls(rows_of(groups), CallPlan(TrainParams(max_tokens_per_call=4 * 12), needs_groups=True))
    assert all(len({id(g) for g, _ in call}) == 1 and len(call) == 4 for call in whole)
    rows = plan_calls(rows_of(groups), CallPlan(TrainParams(max_tokens_per_call=24)))
    assert all(padded_tokens(call) <= 24 for call in rows)
    assert sum(len(c) for c in rows) == 8 and len(rows) > 2
    # less padding than whole-group calls of the same rows
    padded = sum(padded_tokens(c) for c in rows)
    assert padded < sum(padded_tokens(rows_of([g])) for g in groups)
