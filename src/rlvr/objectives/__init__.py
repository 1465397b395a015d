"""The objectives: each a pure loss function `loss = fn(batch, params)` of a
PolicyBatch (tensors and masks, base.py) and its own settings dataclass,
registered by name (registry.py), as verl's core_algos registers its losses.

To add one, write a module here with its settings dataclass (a subclass of
base.ObjectiveParams or policy_term.PolicyTermParams, a comment per field, a
`ranges` entry per numeric field, `needs()` for what it reads besides
log-probs, `check()` for its own rules) and its loss decorated with
`@register(name, Params, examples=({...},))`, the examples' settings running
through the contract tests (tests/objectives/test_objective_contract.py);
then add a `methods:` entry with `objective: name` to params. Nothing else changes: the trainer asks the
settings what to compute, the config checks call `check()`, and DVC's train
stage depends on this whole directory.
"""
