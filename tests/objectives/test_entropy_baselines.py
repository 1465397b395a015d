"""SIREN's entropy baselines against values computed by hand on tiny tensors.

Conventions of every test: old_logp = logp - log(ratio), so rho is the ratio we
write down; Dr. GRPO advantages (r - group mean, no std); the loss is the sum of
token losses over (N responses * max_response_len) — seq-mean-token-sum-norm.
"""

import math

import pytest
import torch

from rlvr.objectives.base import PolicyBatch, seq_sum_norm, token_covariance
from rlvr.objectives.clip_cov import batch_seed
from rlvr.objectives.forking_80_20 import forking_mask
from rlvr.objectives.registry import objective, settings

LN2 = math.log(2.0)


def loss(name: str, batch: PolicyBatch, generator=None, **kw):
    """The registered objective's loss on `batch` with its settings and `kw`."""
    fn = objective(name).loss
    return fn(batch, settings(name, **kw)) if generator is None else fn(batch, settings(name, **kw), generator)


def make_batch(logp, ratios, mask, rewards, n=2, max_len=4, **kw) -> PolicyBatch:
    logp = torch.tensor(logp, requires_grad=True)
    old = logp.detach() - torch.log(torch.tensor(ratios))
    return PolicyBatch(logp=logp, old_logp=old, mask=torch.tensor(mask), rewards=torch.tensor(rewards),
                       group_size=n, max_response_len=max_len, **kw)


# ---- the shared aggregation --------------------------------------------------------------------------

def test_seq_sum_norm_counts_padding_in_the_denominator():
    x = torch.tensor([[1.0, 2.0, 50.0], [3.0, 50.0, 50.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    # (1 + 2 + 3) / (2 responses * 5) — the 50s are padding
    assert seq_sum_norm(x, mask, 5).item() == pytest.approx(0.6)
    with pytest.raises(ValueError):
        seq_sum_norm(x, mask, 0)


def test_registered_with_their_needs_and_official_defaults():
    needs = {name: settings(name).needs() for name in ("entropy_reg", "clip_cov", "kl_cov", "entropy_adv",
                                                        "forking_80_20")}
    assert needs["entropy_reg"].entropies == needs["entropy_adv"].entropies == needs["forking_80_20"].entropies \
        == {"entropy"}
    assert needs["entropy_reg"].grad_entropies == {"entropy"}  # the bonus carries gradient
    assert not needs["entropy_adv"].grad_entropies and not needs["forking_80_20"].grad_entropies  # read only
    assert not needs["clip_cov"].entropies and not needs["kl_cov"].entropies
    c, k = settings("clip_cov"), settings("kl_cov")
    assert (c.cov_clip_ratio, c.cov_clip_bounds_low, c.cov_clip_bounds_high) == (2e-4, 1.0, 5.0)
    assert (k.kl_cov_ratio, k.kl_cov_coef) == (2e-4, 1.0)
    a, f = settings("entropy_adv"), settings("forking_80_20")
    assert (a.entropy_adv_alpha, a.entropy_adv_kappa) == (0.4, 1.0)
    assert (f.forking_top_ratio, f.forking_scope) == (0.2, "response")


# ---- entropy_reg -------------------------------------------------------------------------------------

def entropy_reg_batch():
    """Q1 rewards [1, 0] -> A = [+0.5, -0.5]; Q2 [1, 1] -> A = 0.
    r0 ratios [1.5, 0.9, pad]; r1 [0.5, 1.0, 1.1]; r2 a one-token response."""
    return make_batch(
        logp=[[-1.0, -1.0, 7.0], [-1.0, -1.0, -1.0], [-1.0, 7.0, 7.0], [-1.0, -1.0, -1.0]],
        ratios=[[1.5, 0.9, 1.0], [0.5, 1.0, 1.1], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
        mask=[[1.0, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]],
        rewards=[1.0, 0, 1, 1],
        entropy=torch.tensor([[1.0, 2, 100], [0.5, 0.5, 1], [3, 50, 50], [1, 1, 1]], requires_grad=True),
    )


def test_entropy_reg_hand_value():
    b = entropy_reg_batch()
    out = loss("entropy_reg", b, entropy_coef=0.01, dual_clip=3.0)
    # policy: r0 (A=+.5): -min(1.5, 1.2)*.5 = -0.6, -0.9*.5 = -0.45
    #         r1 (A=-.5): max(.5*.5, .8*.5) = 0.4, 0.5, 0.55 (dual cap 1.5 not binding); r2, r3: A = 0
    #         sum 0.4 / (4 * 4) = 0.025
    # bonus:  real-token entropy 1+2 + .5+.5+1 + 3 + 1+1+1 = 11 (padding 100 / 50 ignored) / 16 = 0.6875
    assert out.metrics["entropy_bonus"] == pytest.approx(0.6875)
    assert out.loss.item() == pytest.approx(0.025 - 0.01 * 0.6875, rel=1e-5)


def test_entropy_reg_gradient_flows_through_the_entropy():
    b = entropy_reg_batch()
    (g,) = torch.autograd.grad(loss("entropy_reg", b, entropy_coef=0.01).loss, b.entropy)
    # d/dH = -coef / (N * max_len) on each real token, 0 on padding
    assert torch.allclose(g, -0.01 / 16 * b.mask)


def test_entropy_reg_all_equal_group_keeps_only_the_bonus():
    b = make_batch(logp=[[-1.0, -2.0]] * 2, ratios=[[1.3, 0.7]] * 2, mask=[[1.0, 1]] * 2, rewards=[1.0, 1],
                   max_len=2, entropy=torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    out = loss("entropy_reg", b, entropy_coef=0.1)
    assert out.loss.item() == pytest.approx(-0.1 * 10 / 4)
    (g,) = torch.autograd.grad(out.loss, b.logp)
    assert torch.count_nonzero(g) == 0


# ---- covariance, Clip-Cov ----------------------------------------------------------------------------

def cov_batch(r1_ratios=(1.0, 1.0, 1.0)):
    """Q1 [1, 0] -> A = [+.5, -.5]; Q2 [1, 1] -> A = 0. Every token real (12).
    mean(A) over tokens = 0; log p sums to -24 -> mean -2, so
    cov: r0 (lp -1): .5 * 1 = 0.5 each; r1 (lp -6, -8, -1): -.5*-4 = 2, -.5*-6 = 3, -.5*1 = -0.5; r2, r3: 0.
    r0 ratios 1.1 -> token loss -0.55 each."""
    return make_batch(
        logp=[[-1.0, -1, -1], [-6, -8, -1], [-1, -1, -1], [-1, -1, -1]],
        ratios=[[1.1, 1.1, 1.1], list(r1_ratios), [1.0, 1, 1], [1.0, 1, 1]],
        mask=[[1.0, 1, 1]] * 4, rewards=[1.0, 0, 1, 1],
    )


def test_token_covariance_hand_values():
    b = cov_batch()
    adv = torch.tensor([0.5, -0.5, 0, 0])
    cov = token_covariance(adv, b.logp, b.mask)
    assert torch.allclose(cov, torch.tensor([[0.5, 0.5, 0.5], [2, 3, -0.5], [0, 0, 0], [0, 0, 0]]))
    # padding is never selectable and does not enter the means
    b.mask[3, 2] = 0.0
    cov = token_covariance(adv, b.logp, b.mask)
    assert cov[3, 2] == float("-inf") and not cov.requires_grad


def test_clip_cov_detaches_the_band_tokens():
    b = cov_batch()
    out = loss("clip_cov", b, cov_clip_ratio=0.2)  # budget int(0.2 * 12) = 2 = both candidates (cov 2 and 3)
    # left: r0 3 * -0.55 = -1.65; r1 only t2 (A=-.5, rho 1) = 0.5 -> -1.15 / 16
    assert out.loss.item() == pytest.approx(-1.15 / 16, rel=1e-5)
    assert out.metrics["cov_clip_frac"] == pytest.approx(2 / 12)
    (g,) = torch.autograd.grad(out.loss, b.logp)
    assert g[1, 0] == 0 and g[1, 1] == 0  # detached
    assert torch.all(g[0] != 0) and g[1, 2] != 0
    assert torch.count_nonzero(g[2:]) == 0  # A = 0


def test_clip_cov_skips_tokens_the_ppo_clip_already_clipped():
    # r1 t1 (cov 3) has rho 0.5 with A < 0: -clip(rho)A = 0.4 > -rho A = 0.25 -> clipped, not a candidate
    b = cov_batch(r1_ratios=(1.0, 0.5, 1.0))
    out = loss("clip_cov", b, cov_clip_ratio=0.2)
    # only t0 is detached: r0 -1.65; r1 t1 0.4 (clipped value), t2 0.5 -> -0.75 / 16
    assert out.loss.item() == pytest.approx(-0.75 / 16, rel=1e-5)
    assert out.metrics["cov_candidates"] == 1.0


def test_clip_cov_empty_band_is_the_plain_clipped_loss():
    b = cov_batch()
    out = loss("clip_cov", b, cov_clip_bounds_low=10.0, cov_clip_bounds_high=20.0)
    # nothing selected: -1.65 + 3 * 0.5 = -0.15 over 16, = dr_grpo (no dual clip in either)
    assert out.loss.item() == pytest.approx(-0.15 / 16, rel=1e-5)
    assert out.loss.item() == pytest.approx(loss("dr_grpo", cov_batch()).loss.item(), rel=1e-6)
    # bounds are strict: a band ending exactly at 2 excludes cov = 2
    assert loss("clip_cov", cov_batch(), cov_clip_ratio=0.2, cov_clip_bounds_low=2.0).metrics["cov_candidates"] == 1.0


def test_clip_cov_random_choice_is_seeded_and_pure():
    # default budget max(int(2e-4 * 12), 1) = 1 of the 2 candidates -> a random draw. Either way one
    # 0.5 token of r1 goes: -1.65 + 0.5 + 0.5 = -0.65 over 16; which one shows in the gradient.
    seen = set()
    for seed in range(20):
        b = cov_batch()
        out = loss("clip_cov", b, generator=torch.Generator().manual_seed(seed))
        assert out.loss.item() == pytest.approx((-1.65 + 1.0) / 16, rel=1e-5)
        (g,) = torch.autograd.grad(out.loss, b.logp)
        zeros = tuple(i for i in range(2) if g[1, i] == 0)
        assert len(zeros) == 1
        seen.add(zeros)
    assert seen == {(0,), (1,)}  # really random across seeds
    # no generator: seeded from the batch -> the same choice every call
    grads = []
    for _ in range(3):
        b = cov_batch()
        (g,) = torch.autograd.grad(loss("clip_cov", b).loss, b.logp)
        grads.append(g)
    assert all(torch.equal(grads[0], g) for g in grads)
    assert batch_seed(cov_batch()) == batch_seed(cov_batch()) != batch_seed(cov_batch((1.0, 0.5, 1.0)))


def test_clip_cov_all_equal_group_and_empty_mask():
    b = make_batch(logp=[[-1.0, -5.0]] * 2, ratios=[[1.1, 0.9]] * 2, mask=[[1.0, 1]] * 2, rewards=[0.0, 0],
                   max_len=2)
    out = loss("clip_cov", b, cov_clip_bounds_low=-1.0)  # cov = 0 everywhere, inside (-1, 5)
    assert out.loss.item() == 0.0
    empty = make_batch(logp=[[-1.0, -1.0]] * 2, ratios=[[1.0, 1.0]] * 2, mask=[[0.0, 0]] * 2, rewards=[1.0, 0],
                       max_len=2)
    assert loss("clip_cov", empty).loss.item() == 0.0


# ---- KL-Cov ------------------------------------------------------------------------------------------

def test_kl_cov_hand_value_and_no_ppo_clip():
    # r1 ratios [1.2, 0.5, 1.0]; covariances as in cov_batch: top-1 is r1 t1 (cov 3)
    b = cov_batch(r1_ratios=(1.2, 0.5, 1.0))
    out = loss("kl_cov", b)  # k = max(1, int(12 * 2e-4)) = 1
    # -rho A (no clipping): r0 3 * -0.55 = -1.65; r1 .5*1.2 = 0.6, .5*.5 = 0.25 (clipped would be 0.4), 0.5
    # + |log 0.5| = ln 2 on r1 t1
    assert out.loss.item() == pytest.approx((-1.65 + 0.6 + 0.25 + 0.5 + LN2) / 16, rel=1e-5)
    # k = int(12 * 0.2) = 2 adds t0 (cov 2): + ln 1.2
    out2 = loss("kl_cov", cov_batch(r1_ratios=(1.2, 0.5, 1.0)), kl_cov_ratio=0.2, kl_cov_coef=0.5)
    assert out2.loss.item() == pytest.approx((-0.3 + 0.5 * (LN2 + math.log(1.2))) / 16, rel=1e-5)
    assert out2.metrics["kl_cov_frac"] == pytest.approx(2 / 12)


def test_kl_cov_gradient_of_the_kl_term_only_on_selected_tokens():
    b = cov_batch(r1_ratios=(1.2, 0.5, 1.0))
    (g,) = torch.autograd.grad(loss("kl_cov", b).loss, b.logp)
    b0 = cov_batch(r1_ratios=(1.2, 0.5, 1.0))
    (g0,) = torch.autograd.grad(loss("kl_cov", b0, kl_cov_coef=0.0).loss, b0.logp)
    # d/dlogp coef * |logp - old| = coef * sign(log 0.5) = -1 on r1 t1, over 16
    expected = torch.zeros(4, 3)
    expected[1, 1] = -1.0 / 16
    assert torch.allclose(g - g0, expected, atol=1e-7)
    # and the plain term is -A rho / 16 on every token with A != 0 (no clip zeroing anything)
    assert torch.allclose(g0[1], torch.tensor([0.5 * 1.2, 0.5 * 0.5, 0.5]) / 16)


def test_kl_cov_ignores_padding_and_handles_edge_cases():
    b = cov_batch(r1_ratios=(1.2, 0.5, 1.0))
    ref = loss("kl_cov", b).loss.item()
    # add a padded column whose token would have the largest covariance if it were counted
    logp = torch.cat([b.logp.detach(), torch.tensor([[-1.0], [-50.0], [-1.0], [-1.0]])], 1).requires_grad_()
    ratios = torch.cat([torch.exp(b.logp.detach() - b.old_logp), torch.full((4, 1), 3.0)], 1)
    padded = PolicyBatch(logp=logp, old_logp=logp.detach() - ratios.log(),
                         mask=torch.cat([b.mask, torch.zeros(4, 1)], 1), rewards=b.rewards, group_size=2,
                         max_response_len=4)
    assert loss("kl_cov", padded).loss.item() == pytest.approx(ref, rel=1e-6)
    # all-equal rewards: cov = 0 everywhere, -rho A = 0, one token still gets |log rho| = 0.1
    eq = make_batch(logp=[[-1.0, -2.0]] * 2, ratios=[[math.exp(0.1)] * 2] * 2, mask=[[1.0, 1]] * 2,
                    rewards=[1.0, 1], max_len=2)
    assert loss("kl_cov", eq).loss.item() == pytest.approx(0.1 / 4, rel=1e-5)
    empty = make_batch(logp=[[-1.0]] * 2, ratios=[[2.0]] * 2, mask=[[0.0]] * 2, rewards=[1.0, 0], max_len=1)
    assert loss("kl_cov", empty).loss.item() == 0.0


# ---- Entropy-Adv -------------------------------------------------------------------------------------

def entropy_adv_batch():
    """Q1 [1, 0] -> A = [+.5, -.5]; Q2 [1, 1] -> A = 0.
    r0 ratios [1.5, 0.9, pad], H [1, 0.5, 100]; r1 ratios [0.5, 1.0, 5.0], H [2, 0.25, 1]."""
    return make_batch(
        logp=[[-1.0, -1, 7], [-1, -1, -1], [-1, -1, -1], [-1, -1, -1]],
        ratios=[[1.5, 0.9, 1.0], [0.5, 1.0, 5.0], [1.3, 1, 1], [0.7, 1, 1]],
        mask=[[1.0, 1, 0], [1, 1, 1], [1, 1, 1], [1, 1, 1]],
        rewards=[1.0, 0, 1, 1],
        entropy=torch.tensor([[1.0, 0.5, 100], [2, 0.25, 1], [3, 3, 3], [3, 3, 3]], requires_grad=True),
    )


def test_entropy_adv_hand_value_kappa_1_with_dual_clip():
    out = loss("entropy_adv", entropy_adv_batch(), dual_clip=3.0)
    # bonus min(0.4 H, |A|/1): r0 [0.4, 0.2] -> A' [0.9, 0.7]; r1 [min(.8,.5), .1, .4] -> A' [0, -0.4, -0.1]
    # r0: -min(1.5*.9, 1.2*.9) = -1.08; -0.9*.7 = -0.63
    # r1: A' = 0 -> 0; rho 1: 0.4; rho 5, A' = -.1: max(0.5, 0.12) = 0.5, dual cap 3*.1 = 0.3 -> 0.3
    # r2, r3: A = 0 -> bonus min(., 0) = 0 -> 0
    assert out.loss.item() == pytest.approx((-1.08 - 0.63 + 0.4 + 0.3) / 16, rel=1e-5)
    # without the dual clip the rho-5 token costs 0.5
    assert loss("entropy_adv", entropy_adv_batch()).loss.item() == pytest.approx((-1.08 - 0.63 + 0.4 + 0.5) / 16,
                                                                               rel=1e-5)


def test_entropy_adv_hand_value_kappa_2():
    out = loss("entropy_adv", entropy_adv_batch(), dual_clip=3.0, entropy_adv_kappa=2.0)
    # |A|/2 = 0.25: r0 bonus [0.25, 0.2] -> A' [0.75, 0.7]; r1 [0.25, 0.1, 0.25] -> A' [-0.25, -0.4, -0.25]
    # r0: -min(1.125, 0.9) = -0.9; -0.63.  r1: max(.125, .2) = 0.2; 0.4; max(1.25, .3) capped at .75
    assert out.loss.item() == pytest.approx((-0.9 - 0.63 + 0.2 + 0.4 + 0.75) / 16, rel=1e-5)


def test_entropy_adv_entropy_carries_no_gradient():
    b = entropy_adv_batch()
    out = loss("entropy_adv", b)
    g_h, g_lp = torch.autograd.grad(out.loss, [b.entropy, b.logp], allow_unused=True)
    assert g_h is None or torch.count_nonzero(g_h) == 0
    assert g_lp.abs().sum() > 0
    with pytest.raises(ValueError):
        loss("entropy_adv", entropy_adv_batch(), entropy_adv_kappa=0.0)


def test_entropy_adv_keeps_the_sign_and_zero_groups():
    torch.manual_seed(0)
    logp = torch.randn(6, 5, requires_grad=True)
    b = PolicyBatch(logp=logp, old_logp=logp.detach(), mask=torch.ones(6, 5),
                    rewards=torch.tensor([1.0, 0, 0, 1, 1, 1]), group_size=3, max_response_len=5,
                    entropy=torch.rand(6, 5) * 1.5)
    (g,) = torch.autograd.grad(loss("entropy_adv", b).loss, logp)
    # at rho = 1 the token loss is -A' rho, so A' = -g * N * T. With kappa = 1 the bonus is in [0, |A|]:
    # A > 0 -> A <= A' <= 2A; A < 0 -> A <= A' <= 0 (never flips); the all-correct group has A' = 0
    shaped = -g * 30
    adv = torch.tensor([2 / 3, -1 / 3, -1 / 3, 0, 0, 0]).unsqueeze(-1).expand_as(shaped)
    assert torch.all(shaped >= adv - 1e-6) and torch.all(shaped <= adv + adv.abs() + 1e-6)
    assert torch.all(shaped[0] > 2 / 3) and torch.count_nonzero(g[3:]) == 0
    # the bonus bites: some negative tokens reach the cap (A' = 0), some stay negative
    assert (shaped[1:3].abs() < 1e-6).any() and (shaped[1:3] < -1e-6).any()


# ---- 80/20 forking tokens ----------------------------------------------------------------------------

def forking_batch():
    """Q1 [1, 0] -> A = [+.5, -.5]; Q2 [0, 1] -> A = [-.5, +.5].
    H: r0 [1, 2, 3, 4]; r1 [5, 1, 1, pad 100]; r2 one token [6]; r3 constant [2, 2, 2, 2].
    Ratios: r0 t3 1.1, r1 t0 0.9, every other token 1.1."""
    return make_batch(
        logp=[[-1.0] * 4] * 4,
        ratios=[[1.1] * 4, [0.9, 1.1, 1.1, 1.1], [1.1] * 4, [1.1] * 4],
        mask=[[1.0, 1, 1, 1], [1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]],
        rewards=[1.0, 0, 0, 1],
        entropy=torch.tensor([[1.0, 2, 3, 4], [5, 1, 1, 100], [6, 0, 0, 0], [2, 2, 2, 2]], requires_grad=True),
    )


def test_forking_mask_per_response_and_per_batch():
    b = forking_batch()
    m = forking_mask(b.entropy, b.mask, 0.2, "response")
    # r0: 0.8 quantile of [1,2,3,4] = 3 + 0.4 = 3.4 -> t3; r1 (3 real): [1,1,5] -> 1 + 0.6*4 = 3.4 -> t0, never
    # the padded 100; r2: one token, quantile = itself, strict '>' -> none; r3: constant -> none
    assert m.tolist() == [[0, 0, 0, 1], [1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    mb = forking_mask(b.entropy, b.mask, 0.2, "batch")
    # 12 real values sorted 1,1,1,2,2,2,2,2,3,4,5,6: position 0.8*11 = 8.8 -> 3 + 0.8 = 3.8 -> keep 4, 5, 6
    assert mb.tolist() == [[0, 0, 0, 1], [1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]
    with pytest.raises(ValueError):
        forking_mask(b.entropy, b.mask, 0.2, "group")
    with pytest.raises(ValueError):
        forking_mask(b.entropy, b.mask, 1.0)


def test_forking_80_20_hand_value_and_gradient_only_on_selected_tokens():
    b = forking_batch()
    out = loss("forking_80_20", b, dual_clip=3.0)
    # r0 t3 (A +.5, rho 1.1): -0.55; r1 t0 (A -.5, rho 0.9): max(.45, .45) = 0.45; over 4 * 4
    assert out.loss.item() == pytest.approx((-0.55 + 0.45) / 16, rel=1e-5)
    assert out.metrics["forking_frac"] == pytest.approx(2 / 12)
    g_lp, g_h = torch.autograd.grad(out.loss, [b.logp, b.entropy], allow_unused=True)
    expected = torch.zeros(4, 4)
    expected[0, 3] = -0.5 * 1.1 / 16  # d(-A rho)/dlogp = -A rho
    expected[1, 0] = 0.5 * 0.9 / 16
    assert torch.allclose(g_lp, expected, atol=1e-7)  # r2, r3 have A != 0 but nothing selected
    assert g_h is None or torch.count_nonzero(g_h) == 0  # entropy only selects


def test_forking_80_20_batch_scope():
    out = loss("forking_80_20", forking_batch(), forking_scope="batch")
    # adds r2 t0 (A -.5, rho 1.1): max(.55, .55) = 0.55
    assert out.loss.item() == pytest.approx((-0.55 + 0.45 + 0.55) / 16, rel=1e-5)


def test_forking_80_20_empty_selection_and_empty_response():
    b = make_batch(logp=[[-1.0, -1.0], [-1.0, -1.0]], ratios=[[1.1, 1.1]] * 2, mask=[[1.0, 1], [0, 0]],
                   rewards=[1.0, 0], max_len=2, entropy=torch.tensor([[2.0, 2.0], [1.0, 9.0]]))
    out = loss("forking_80_20", b)
    assert out.loss.item() == 0.0 and out.metrics["forking_frac"] == 0.0
    assert loss("forking_80_20", b, forking_scope="batch").loss.item() == 0.0


# ---- all of them -------------------------------------------------------------------------------------

NEW = ("entropy_reg", "clip_cov", "kl_cov", "entropy_adv", "forking_80_20")


@pytest.mark.parametrize("name", NEW)
def test_finite_with_an_empty_response_and_wild_padding(name):
    logp = torch.tensor([[-1.0, -2.0, 30.0], [-40.0, 30.0, 30.0]], requires_grad=True)
    b = PolicyBatch(logp=logp, old_logp=torch.full((2, 3), -1.5), mask=torch.tensor([[1.0, 1, 0], [0, 0, 0]]),
                    rewards=torch.tensor([1.0, 0.0]), group_size=2, max_response_len=3,
                    entropy=torch.tensor([[1.0, 2.0, 1e4], [1e4, 1e4, 1e4]]))
    coef = {"entropy_coef": 0.01} if "entropy_coef" in objective(name).params.__dataclass_fields__ else {}
    out = objective(name).loss(b, settings(name, **coef))
    assert torch.isfinite(out.loss)
    (g,) = torch.autograd.grad(out.loss, logp)
    assert torch.isfinite(g).all() and torch.count_nonzero(g[1]) == 0 and g[0, 2] == 0


@pytest.mark.parametrize("name", NEW)
def test_needs_max_response_len(name):
    b = entropy_reg_batch()
    b.max_response_len = 0
    with pytest.raises(ValueError):
        objective(name).loss(b, settings(name))


@pytest.mark.parametrize("name", ["entropy_reg", "entropy_adv", "forking_80_20"])
def test_entropy_objectives_say_what_they_miss(name):
    b = cov_batch()
    with pytest.raises(ValueError, match="entropy"):
        objective(name).loss(b, settings(name))
