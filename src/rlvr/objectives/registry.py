"""Every objective by name (see rlvr.objectives for the names and their needs)."""

from __future__ import annotations

from rlvr.objectives import NAMES
from rlvr.objectives.base import LossOutput, PolicyBatch
from rlvr.objectives.disco import disco
from rlvr.objectives.entropy_baselines import clip_cov, entropy_adv, entropy_reg, forking_80_20, kl_cov
from rlvr.objectives.grpo import dapo, dr_grpo, grpo, grpo_er, grpo_rw
from rlvr.objectives.siren import siren

OBJECTIVES = {
    "grpo": grpo, "grpo_rw": grpo_rw, "grpo_er": grpo_er, "dr_grpo": dr_grpo, "dapo": dapo, "disco": disco,
    "siren": siren, "entropy_reg": entropy_reg, "clip_cov": clip_cov, "kl_cov": kl_cov,
    "entropy_adv": entropy_adv, "forking_80_20": forking_80_20,
}
assert tuple(OBJECTIVES) == NAMES, "rlvr.objectives.NAMES and the registry disagree"

__all__ = ["OBJECTIVES", "PolicyBatch", "LossOutput"]
