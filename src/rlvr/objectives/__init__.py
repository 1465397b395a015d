"""Objectives behind one interface: `loss = OBJECTIVES[name](batch, hp)`.

Each is a pure function of a PolicyBatch (tensors and masks) and the method's
hyperparameters. To add one: write a function here (or a module of its own)
and register it below, then add a params entry under `methods:`.
"""

from __future__ import annotations

from rlvr.objectives.base import LossOutput, PolicyBatch
from rlvr.objectives.disco import disco
from rlvr.objectives.grpo import dapo, dr_grpo, grpo, grpo_er
from rlvr.objectives.siren import siren

OBJECTIVES = {"grpo": grpo, "grpo_er": grpo_er, "dr_grpo": dr_grpo, "dapo": dapo, "disco": disco, "siren": siren}

# What the trainer must compute besides log-probs for each objective.
NEEDS = {"grpo_er": {"entropy"}, "siren": {"topp_entropy"}}

__all__ = ["OBJECTIVES", "NEEDS", "PolicyBatch", "LossOutput"]
