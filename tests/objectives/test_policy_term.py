"""The composable policy term (rlvr.objectives.policy_term): GRPO, Dr. GRPO,
DAPO's loss side and GSPO are one loss with other settings; GSPO's sequence
ratio against verl's own function, run side by side."""

import pytest
import torch

from rlvr.objectives.advantages import advantages
from rlvr.objectives.base import PolicyBatch
from rlvr.objectives.registry import objective, settings
from rlvr.schema import ConfigError


def verl_gspo(old_log_prob, log_prob, advantages, response_mask, clip_ratio_low, clip_ratio_high):
    """verl's compute_policy_loss_gspo and agg_loss("seq-mean-token-mean")
    (volcengine/verl b178a3cd, verl/trainer/ppo/core_algos.py lines 1254-1326
    and 1025-1071), their torch lines unchanged; the config object, rollout
    weights and metrics left out."""
    negative_approx_kl = log_prob - old_log_prob
    seq_lengths = torch.sum(response_mask, dim=-1).clamp(min=1)
    negative_approx_kl_seq = torch.sum(negative_approx_kl * response_mask, dim=-1) / seq_lengths
    log_seq_importance_ratio = log_prob - log_prob.detach() + negative_approx_kl_seq.detach().unsqueeze(-1)
    log_seq_importance_ratio = torch.clamp(log_seq_importance_ratio, max=10.0)
    seq_importance_ratio = torch.exp(log_seq_importance_ratio)
    pg_losses1 = -advantages * seq_importance_ratio
    pg_losses2 = -advantages * torch.clamp(seq_importance_ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    pg_losses = torch.maximum(pg_losses1, pg_losses2)
    seq_mask = torch.sum(response_mask, dim=-1)
    seq_losses = torch.sum(pg_losses * response_mask, dim=-1) / (seq_mask + 1e-8)
    seq_mask = (seq_mask > 0).float()
    return (seq_losses * seq_mask).sum() / seq_mask.sum()


def random_batch(seed: int, rows: int = 8, width: int = 12, n: int = 4) -> PolicyBatch:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, width + 1, (rows,), generator=g)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).float()
    logp = (-torch.rand(rows, width, generator=g) * 3).requires_grad_()
    old = logp.detach() + torch.randn(rows, width, generator=g) * 0.01 * (seed % 7)  # some ratios clip
    rewards = torch.randint(0, 2, (rows,), generator=g).float()
    return PolicyBatch(logp=logp, old_logp=old, mask=mask, rewards=rewards, group_size=n, max_response_len=width)


@pytest.mark.parametrize("seed", range(40))
def test_a_sequence_ratio_is_verls_gspo(seed):
    batch = random_batch(seed)
    hp = settings("grpo", ratio="sequence", clip_low=3e-4, clip_high=4e-4)
    ours = objective("grpo").loss(batch, hp).loss
    a = advantages(batch, "grpo", hp.adv_eps).unsqueeze(-1).expand_as(batch.logp)
    theirs = verl_gspo(batch.old_logp, batch.logp, a, batch.mask, 3e-4, 4e-4)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    g_ours, = torch.autograd.grad(ours, batch.logp)
    g_theirs, = torch.autograd.grad(verl_gspo(batch.old_logp, batch.logp, a, batch.mask, 3e-4, 4e-4), batch.logp)
    torch.testing.assert_close(g_ours, g_theirs, rtol=1e-5, atol=1e-7)


def test_a_sequence_ratio_is_one_value_per_response_with_each_tokens_gradient():
    """Two tokens of log-ratio 0.2 and -0.4: the response's ratio is exp(-0.1)
    on both tokens, and d rho / d log p_t = rho (each token's own path)."""
    from rlvr.objectives.policy_term import log_ratio

    logp = torch.tensor([[0.2, -0.4, 9.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    r = log_ratio(logp, torch.zeros(1, 3), "sequence", mask)
    assert r[0, :2].tolist() == pytest.approx([-0.1, -0.1])
    (g,) = torch.autograd.grad(torch.exp(r[0, :2]).sum(), logp)
    assert g[0].tolist() == pytest.approx([torch.exp(torch.tensor(-0.1)).item()] * 2 + [0.0])


def test_the_gspo_recipe_is_a_params_entry_and_the_parts_are_checked():
    from rlvr.settings.methods import method_config, parse_recipe

    params = parse_recipe({"methods": {"gspo": {"objective": "grpo", "ratio": "sequence", "clip_low": 3e-4,
                                                "clip_high": 4e-4}}})
    assert params.methods["gspo"].settings["ratio"] == "sequence"
    assert method_config(params, "gspo").objective.ratio == "sequence"
    with pytest.raises(ConfigError) as e:
        parse_recipe({"methods": {"x": {"objective": "grpo", "ratio": "sequense", "aggregation": "token_mean",
                                        "advantage": "gae"}}})
    for needle in ("'methods.x.ratio' has unknown value 'sequense' (did you mean 'sequence'?)",
                   "'methods.x.aggregation' has unknown value 'token_mean' (did you mean 'token-mean'?)",
                   "'methods.x.advantage' has unknown value 'gae'"):
        assert needle in str(e.value)


@pytest.mark.parametrize("name, parts", [
    ("grpo", {"advantage": "grpo", "aggregation": "seq-mean-token-mean"}),
    ("dr_grpo", {"advantage": "dr_grpo", "aggregation": "seq-mean-token-sum-norm"}),
    ("dapo", {"advantage": "grpo", "aggregation": "token-mean"}),
    ("grpo_rw", {"advantage": "grpo_rw", "aggregation": "seq-mean-token-mean"}),
])
def test_the_grpo_family_is_one_loss_with_other_defaults(name, parts):
    """Each preset equals grpo with its parts set by hand."""
    batch = random_batch(3)
    preset = objective(name).loss(batch, settings(name)).loss
    by_hand = objective("grpo").loss(batch, settings("grpo", **parts)).loss
    assert preset.item() == by_hand.item()
