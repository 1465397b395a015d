"""Objectives behind one interface: `loss = OBJECTIVES[name](batch, hp)`.

Each is a pure function of a PolicyBatch (tensors and masks) and the method's
hyperparameters. The functions are registered in `rlvr.objectives.registry`;
this package itself holds only their names and needs, so that validating a
params file does not import any loss (or torch).

To add one: write the function in a module here, add its name to NAMES (and
to NEEDS if it reads entropies, to WHOLE_GROUPS if its loss needs a
question's responses together), register it in registry.py, then add a
params entry under `methods:`.
"""

NAMES = (
    "grpo", "grpo_rw", "grpo_er", "dr_grpo", "dapo", "disco", "siren",
    # SIREN's entropy baselines (entropy_baselines.py)
    "entropy_reg", "clip_cov", "kl_cov", "entropy_adv", "forking_80_20",
)

# What the trainer computes besides log-probs, per objective.
NEEDS = {
    "grpo_er": {"entropy"}, "siren": {"topp_entropy"},
    "entropy_reg": {"entropy"}, "entropy_adv": {"entropy"}, "forking_80_20": {"entropy"},
}
# Objectives whose loss couples a question's responses through the policy
# (DisCO's scores, with gradient): every loss call holds whole groups. The
# others read a group only through its rewards (PolicyBatch.group_rewards), so
# a token-budget loss call may hold any of a group's responses.
WHOLE_GROUPS = {"disco"}

# The entropies that carry gradient into the loss; entropy_adv and forking_80_20
# only read theirs (advantage shaping, token selection), so it is measured without.
NEEDS_GRAD = {"grpo_er": {"entropy"}, "siren": {"topp_entropy"}, "entropy_reg": {"entropy"}}
