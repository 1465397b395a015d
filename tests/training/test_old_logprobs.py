"""pi_old's log-probs belong to the update that measured them, not to the rollouts."""

import dataclasses

import pytest
import torch

from rlvr.data.records import Record
from rlvr.rollout.groups import Group
from rlvr.training.update import OldLogProbs


def group(lengths: list[int]) -> Group:
    record = Record(id="q-0", problem="q", answer="1", source="arithmetic")
    return Group(record, [1, 2], [[7] * n for n in lengths], [False] * len(lengths), [0.0] * len(lengths),
                 [False] * len(lengths))


def test_kept_log_probs_come_back_padded_in_any_rows_order():
    g, h = group([2, 3]), group([1, 1])
    old = OldLogProbs()
    old.keep([(g, 0), (g, 1)], torch.tensor([[-1.0, -2.0, 9.0], [-3.0, -4.0, -5.0]]))  # 9.0: padding, cut off
    old.keep([(h, 1)], torch.tensor([[-6.0, 9.0, 9.0]]))
    got = old.of([(h, 1), (g, 0), (g, 1)], torch.ones(3, 4))
    assert torch.equal(got, torch.tensor([[-6.0, 0, 0, 0], [-1.0, -2.0, 0, 0], [-3.0, -4.0, -5.0, 0]]))


def test_a_row_never_measured_is_an_error_not_a_zero():
    g = group([2])
    with pytest.raises(RuntimeError, match="no pi_old log-probs"):
        OldLogProbs().of([(g, 0)], torch.ones(1, 2))


def test_the_rollout_group_carries_no_training_state():
    assert "old_logp" not in {f.name for f in dataclasses.fields(Group)}
