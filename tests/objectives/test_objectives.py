"""Every objective against values computed by hand on tiny tensors."""

import math

import pytest
import torch

from rlvr.objectives.advantages import group_advantages, reweighted_advantages
from rlvr.objectives.base import MiniBatchTotals, PolicyBatch, policy_kl, seq_mean, token_mean
from rlvr.objectives.disco import scores
from rlvr.objectives.registry import objective, settings
from rlvr.objectives.siren import aggregate, anchor_value, peak_entropy_mask
from rlvr.rollout.groups import overlong_penalty
from rlvr.settings.train import TrainParams
from rlvr.training.entropy import topp_entropy

A = 1 / math.sqrt(2)  # |advantage| of rewards [1, 0] with the sample std


def two_response_batch(**kw) -> PolicyBatch:
    """One group, n=2, rewards [1, 0]. Ratios: response 0 -> [1.5, 0.9],
    response 1 -> [0.5, <pad>]; the padded token has a wild value that must not matter."""
    old = torch.zeros(2, 2)
    logp = torch.tensor([[math.log(1.5), math.log(0.9)], [math.log(0.5), 7.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    return PolicyBatch(logp=logp, old_logp=old, mask=mask, rewards=torch.tensor([1.0, 0.0]), group_size=2,
                       max_response_len=4, **kw)


def hp(name: str, **kw):
    """Objective `name`'s settings with `kw` (adv_eps 0 where it has one, for hand values)."""
    extra = {"adv_eps": 0.0} if "adv_eps" in objective(name).params.__dataclass_fields__ else {}
    return settings(name, **{**extra, **kw})


def loss(name: str, batch: PolicyBatch, **kw):
    """The registered objective's loss on `batch` with hp(name, **kw)."""
    return objective(name).loss(batch, hp(name, **kw))


def test_group_advantages_hand_values():
    adv = group_advantages(torch.tensor([1.0, 0, 0, 0]), 4, eps=0.0)
    # mean 0.25, sample std 0.5
    assert torch.allclose(adv, torch.tensor([1.5, -0.5, -0.5, -0.5]))
    assert torch.allclose(group_advantages(torch.tensor([1.0, 0, 0, 0]), 4, scale=False),
                          torch.tensor([0.75, -0.25, -0.25, -0.25]))


@pytest.mark.parametrize("rewards", [[1.0, 1, 1, 1], [0.0, 0, 0, 0]])
def test_all_equal_group_has_zero_advantage_and_no_gradient(rewards):
    assert torch.equal(group_advantages(torch.tensor(rewards), 4), torch.zeros(4))
    logp = torch.randn(4, 3, requires_grad=True)
    batch = PolicyBatch(logp=logp, old_logp=logp.detach() + 0.1, mask=torch.ones(4, 3),
                        rewards=torch.tensor(rewards), group_size=4, max_response_len=3)
    for name in ("grpo", "dr_grpo", "dapo"):
        out = loss(name, batch)
        assert out.loss.item() == pytest.approx(0.0)
        (g,) = torch.autograd.grad(out.loss, logp)
        assert torch.count_nonzero(g) == 0


def test_grpo_hand_value():
    out = loss("grpo", two_response_batch(), clip_low=0.2, clip_high=0.2)
    # response 0 (A=+a): tokens -1.2a (clipped at 1.2), -0.9a -> mean -1.05a
    # response 1 (A=-a): ratio 0.5 clipped to 0.8 -> +0.8a; the padded token ignored
    assert out.loss.item() == pytest.approx((-1.05 * A + 0.8 * A) / 2, rel=1e-5)
    assert out.metrics["clip_frac"] == pytest.approx(2 / 3)


def test_grpo_k3_kl_to_reference():
    b = two_response_batch(ref_logp=torch.zeros(2, 2))
    base = loss("grpo", two_response_batch()).loss.item()
    out = loss("grpo", b, kl_coef=0.1)
    # k3(logp, ref=0) = exp(-logp) + logp - 1 per token, then sequence-mean, then mean
    k = lambda r: 1 / r + math.log(r) - 1  # noqa: E731
    kl = ((k(1.5) + k(0.9)) / 2 + k(0.5)) / 2
    assert out.metrics["kl_ref"] == pytest.approx(kl, rel=1e-5)
    assert out.loss.item() == pytest.approx(base + 0.1 * kl, rel=1e-5)


def test_grpo_er_subtracts_entropy_bonus():
    ent = torch.tensor([[1.0, 2.0], [3.0, 100.0]])  # the padded 100 must not count
    out = loss("grpo_er", two_response_batch(entropy=ent), entropy_coef=0.01)
    assert out.loss.item() == pytest.approx((-1.05 * A + 0.8 * A) / 2 - 0.01 * 2.0, rel=1e-5)


def test_dr_grpo_hand_value():
    out = loss("dr_grpo", two_response_batch())
    # A = [0.5, -0.5]; token sum: -1.2*0.5 - 0.9*0.5 + 0.8*0.5 = -0.65; / (2 responses * 4)
    assert out.loss.item() == pytest.approx(-0.65 / 8, rel=1e-5)


def test_grpo_rw_removes_the_question_weight():
    # n = 4, one correct (p = 1/4): +1/p = 4 and -1/(1 - p) = -4/3; all-equal group: 0
    adv = reweighted_advantages(torch.tensor([1.0, 0, 0, 0, 1, 1, 1, 1]), 4)
    assert torch.allclose(adv, torch.tensor([4.0, -4 / 3, -4 / 3, -4 / 3, 0, 0, 0, 0]))
    # GRPO's advantage = GRPO_RW's times sqrt(p (1 - p)) (population std): the difficulty weight
    p = 0.25
    grpo_pop = (torch.tensor([1.0, 0, 0, 0]) - p) / math.sqrt(p * (1 - p))
    assert torch.allclose(adv[:4] * math.sqrt(p * (1 - p)), grpo_pop)


def test_grpo_rw_hand_value():
    # rewards [1, 0]: p = 1/2, A = [+2, -2]. Ratios [1.5, 0.9] and [0.5]; clip 0.2:
    # response 0: max(-1.5*2, -1.2*2) = -2.4, max(-0.9*2, -0.9*2) = -1.8 -> mean -2.1
    # response 1: max(0.5*2, 0.8*2) = 1.6 -> mean over responses (-2.1 + 1.6) / 2
    out = loss("grpo_rw", two_response_batch())
    assert out.loss.item() == pytest.approx((-2.1 + 1.6) / 2, rel=1e-5)


def test_dapo_dual_clip_caps_negative_advantages():
    # response 1 (A = -a) has ratio 0.5 -> unclipped loss 0.5a; with ratio 4 it would be 4a, capped at c*a = 3a
    b = two_response_batch()
    b.logp = torch.tensor([[math.log(1.5), math.log(0.9)], [math.log(4.0), 7.0]], requires_grad=True)
    free = loss("dapo", b, clip_low=0.2, clip_high=0.28).loss.item()
    capped = loss("dapo", b, clip_low=0.2, clip_high=0.28, dual_clip=3.0).loss.item()
    assert free == pytest.approx((-1.28 - 0.9 + 4.0) * A / 3, rel=1e-5)
    assert capped == pytest.approx((-1.28 - 0.9 + 3.0) * A / 3, rel=1e-5)


def test_dapo_mini_batch_totals_make_split_batches_one_token_mean():
    # Two loss calls over one batch: adding (sum_i / total tokens) over the calls is the batch's token
    # mean; averaging each call's own token mean is not.
    torch.manual_seed(0)
    logp = torch.randn(4, 3)
    mask = torch.tensor([[1.0, 1, 1], [1, 0, 0], [1, 1, 0], [1, 0, 0]])
    rewards = torch.tensor([1.0, 0, 0, 1])
    whole = loss("dapo", PolicyBatch(logp, torch.zeros(4, 3), mask, rewards, 2)).loss
    totals = MiniBatchTotals(responses=4, tokens=mask.sum().item(), groups=2)
    halves = [loss("dapo", PolicyBatch(logp[i:i + 2], torch.zeros(2, 3), mask[i:i + 2], rewards[i:i + 2], 2,
                               totals=totals)).loss for i in (0, 2)]
    own = [loss("dapo", PolicyBatch(logp[i:i + 2], torch.zeros(2, 3), mask[i:i + 2], rewards[i:i + 2], 2)).loss
           for i in (0, 2)]
    assert sum(halves).item() == pytest.approx(whole.item(), rel=1e-6)
    assert (sum(own) / 2).item() != pytest.approx(whole.item(), rel=1e-3)


def test_dapo_clip_higher_token_level():
    out = loss("dapo", two_response_batch(), clip_low=0.2, clip_high=0.28)
    # -1.28a - 0.9a + 0.8a over 3 real tokens
    assert out.loss.item() == pytest.approx((-1.28 - 0.9 + 0.8) * A / 3, rel=1e-5)


def test_one_token_responses():
    logp = torch.tensor([[math.log(1.1)], [math.log(1.1)]], requires_grad=True)
    b = PolicyBatch(logp=logp, old_logp=torch.zeros(2, 1), mask=torch.ones(2, 1), rewards=torch.tensor([1.0, 0.0]),
                    group_size=2, max_response_len=1)
    # -1.1a + 1.1a = 0 for grpo; disco basic: s = log 1.1 for both -> J = 0
    assert loss("grpo", b).loss.item() == pytest.approx(0.0, abs=1e-6)
    assert loss("disco", b, form="basic").loss.item() == pytest.approx(0.0, abs=1e-6)


def test_the_means_of_an_empty_response_are_zero():
    """Every objective with an empty response: the contract (test_objective_contract.py)."""
    b = PolicyBatch(logp=torch.zeros(2, 3, requires_grad=True), old_logp=torch.zeros(2, 3),
                    mask=torch.tensor([[1.0, 1, 0], [0, 0, 0]]), rewards=torch.tensor([1.0, 0.0]), group_size=2,
                    max_response_len=3)
    assert seq_mean(torch.ones(2, 3), b.mask).tolist() == [1.0, 0.0]
    assert token_mean(torch.ones(1, 2), torch.zeros(1, 2)).item() == 0.0


def test_overlong_penalty():
    got = overlong_penalty(torch.tensor([5, 6, 8, 10, 11]), max_len=10, buffer=4)
    assert got.tolist() == [0.0, 0.0, -0.5, -1.0, -1.0]


def disco_batch(old_shift=0.0):
    """Two questions, n=3. Q1 rewards [1,0,0]; Q2 all correct (skipped, still counted in B)."""
    logp = torch.tensor([[-1.0, -3.0], [-1.0, 0.0], [-5.0, -3.0],
                         [-1.0, -1.0], [-2.0, -2.0], [-3.0, -3.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1], [1, 0], [1, 1], [1, 1], [1, 1], [1, 1]])
    return PolicyBatch(logp=logp, old_logp=logp.detach() + old_shift, mask=mask,
                       rewards=torch.tensor([1.0, 0, 0, 1, 1, 1]), group_size=3)


def test_disco_scores():
    b = disco_batch()
    assert scores(b, "logl").tolist()[:3] == [-2.0, -1.0, -4.0]
    assert scores(b, "lratio").tolist() == [1.0] * 6  # logp == old_logp


def test_disco_basic_hand_value():
    out = loss("disco", disco_batch(), score="logl", form="basic")
    # J1 = -2 - mean(-1, -4) = 0.5; J2 = 0 (no negatives); B = 2; KL = 0
    assert out.loss.item() == pytest.approx(-0.25)


@pytest.mark.parametrize("tau", [1.0, 10.0])
def test_disco_dro_hand_value(tau):
    out = loss("disco", disco_batch(), score="logl", form="dro", tau=tau)
    j1 = -2 - tau * math.log((math.exp(-1 / tau) + math.exp(-4 / tau)) / 2)
    assert out.loss.item() == pytest.approx(-j1 / 2, rel=1e-5)


def test_disco_dro_tends_to_basic_for_large_tau():
    basic = loss("disco", disco_batch(), form="basic").loss.item()
    assert loss("disco", disco_batch(), form="dro", tau=1e4).loss.item() == pytest.approx(basic, abs=1e-3)
    assert loss("disco", disco_batch(), form="dro", tau=0.5).loss.item() > basic  # softmax over negatives is harsher


def test_disco_dro_is_stable_for_extreme_scores():
    b = disco_batch()
    b.logp = b.logp * 1000
    assert torch.isfinite(loss("disco", b, form="dro", tau=1.0).loss)


def test_disco_squared_hinge_penalty_value_and_gradient():
    d, delta, beta = 0.01, 1e-4, 1000.0
    b = disco_batch(old_shift=d)  # KL = mean(old - logp) = d
    out = loss("disco", b, form="basic", delta=delta, beta=beta)
    assert out.metrics["kl_penalty"] == pytest.approx(0.5 * beta * (d - delta) ** 2, rel=1e-5)
    (g,) = torch.autograd.grad(out.loss, b.logp)
    # d penalty / d logp_it = beta * (KL - delta) * (-1 / number of real tokens) on every real token
    b2 = disco_batch(old_shift=d)
    (g_nopen,) = torch.autograd.grad(loss("disco", b2, form="basic", beta=0.0).loss, b2.logp)
    expected = -beta * (d - delta) / b.mask.sum() * b.mask
    assert torch.allclose(g - g_nopen, expected, atol=1e-5)


def test_disco_inside_trust_region_has_no_penalty():
    out = loss("disco", disco_batch(old_shift=5e-5), form="basic", delta=1e-4)
    assert out.metrics["kl_penalty"] == 0.0 and out.metrics["kl_active"] == 0.0


def test_disco_lratio_uses_ratios():
    b = disco_batch()
    b.old_logp = b.logp.detach() - math.log(2.0)  # every ratio 2 -> every score 2
    out = loss("disco", b, score="lratio", form="basic", beta=0.0)
    assert out.metrics["disco_j"] == pytest.approx(0.0)


def test_policy_kl_estimators():
    logp, old, mask = torch.tensor([[0.0, math.log(2.0)]]), torch.zeros(1, 2), torch.ones(1, 2)
    assert policy_kl(logp, old, mask, "kl").item() == pytest.approx(-math.log(2.0) / 2)
    assert policy_kl(logp, old, mask, "low_var_kl").item() == pytest.approx((1 - math.log(2.0)) / 2)


def logits_of(probs):
    return torch.log(torch.tensor(probs))


def test_topp_entropy_nucleus_excludes_crossing_token():
    h = topp_entropy(logits_of([0.5, 0.2, 0.2, 0.1]), top_p=0.8)
    # cumulative 0.5, 0.7 < 0.8 kept; 0.9 crosses -> S = {0.5, 0.2}
    q = torch.tensor([5 / 7, 2 / 7])
    assert h.item() == pytest.approx(-(q * q.log()).sum().item(), rel=1e-5)


def test_topp_entropy_single_or_empty_nucleus_is_zero():
    assert topp_entropy(logits_of([0.6, 0.3, 0.1]), top_p=0.8).item() == 0.0  # |S| = 1
    assert topp_entropy(logits_of([0.85, 0.1, 0.05]), top_p=0.8).item() == 0.0  # |S| = 0


def test_topp_entropy_temperature_and_top_k():
    logits = torch.randn(3, 50)
    assert torch.allclose(topp_entropy(logits, temperature=2.0), topp_entropy(logits / 2.0))
    # top_k smaller than the nucleus cuts it
    flat = torch.zeros(1, 10)  # uniform: nucleus of 7 tokens at top_p 0.8
    assert topp_entropy(flat, top_p=0.8).item() == pytest.approx(math.log(7), rel=1e-5)
    assert topp_entropy(flat, top_p=0.8, top_k=3).item() == pytest.approx(math.log(3), rel=1e-5)


def test_topp_entropy_large_vocab_matches_the_full_sort():
    """The top-256 probe is exact: a peaked row stays inside it, a flat row (nucleus of
    ~800 tokens) falls back to the full top_k sort; both equal the brute-force value."""
    torch.manual_seed(0)
    peaked = torch.randn(1000) * 0.5
    peaked[:5] += 12.0
    logits = torch.stack([peaked, torch.zeros(1000)])
    h = topp_entropy(logits, top_p=0.8, top_k=10000)
    for row, value in zip(logits, h):
        p = torch.softmax(row, -1).sort(descending=True).values
        s = p[torch.cumsum(p, -1) < 0.8]
        q = s / s.sum()
        assert value.item() == pytest.approx(-(q * q.log()).sum().item(), rel=1e-5)
    assert h[1].item() == pytest.approx(math.log(799), rel=1e-4)  # uniform: 799 tokens below 0.8


def test_topp_entropy_gradient_flows_through_q():
    logits = torch.tensor([[2.0, 1.5, 1.0, -3.0]], requires_grad=True)
    topp_entropy(logits, top_p=0.95).sum().backward()
    assert logits.grad.abs().sum() > 0


def test_peak_entropy_mask_and_aggregate():
    h = torch.tensor([[1.0, 2, 3, 4, 5], [1.0, 2, 3, 4, 9]])
    mask = torch.tensor([[1.0, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    m = peak_entropy_mask(h, mask, 0.8)
    # row 0: quantile 4.2 -> keeps 5; row 1 (4 real): quantile 3.4 -> keeps 4, never the padded 9
    assert m.tolist() == [[0, 0, 0, 0, 1], [0, 0, 0, 1, 0]]
    assert aggregate(h, m).item() == pytest.approx((5 + 4) / 2)
    # a response with no kept token (constant entropy) counts 0
    flat = torch.tensor([[2.0, 2.0], [1.0, 3.0]])
    mflat = peak_entropy_mask(flat, torch.ones(2, 2), 0.8)
    assert mflat.tolist() == [[0, 0], [0, 1]]
    assert anchor_value({"topp_entropy": flat}, torch.ones(2, 2), settings("siren")) == pytest.approx((0 + 3) / 2)


def test_siren_loss_hand_value_with_dual_clip():
    # n=2, rewards [1, 0]: Dr. GRPO advantages [0.5, -0.5]
    logp = torch.tensor([[math.log(1.0)], [math.log(5.0)]], requires_grad=True)
    h = torch.tensor([[1.0], [3.0]])
    b = PolicyBatch(logp=logp, old_logp=torch.zeros(2, 1), mask=torch.ones(2, 1), rewards=torch.tensor([1.0, 0.0]),
                    group_size=2, max_response_len=4, topp_entropy=h, entropy_anchor=0.5)
    out = loss("siren", b, clip_low=0.2, clip_high=0.2, dual_clip=3.0, entropy_coef=0.005)
    # response 0: -1 * 0.5; response 1: max(5*0.5, 1.2*0.5) = 2.5 capped by dual clip at 3*0.5 = 1.5
    # seq-mean-token-sum-norm: (-0.5 + 1.5) / (2 responses * max_response_len 4) = 0.125
    # (the old token mean gave 1.0 / 2 real tokens = 0.5)
    policy = (-0.5 + 1.5) / (2 * 4)
    # single-token responses: quantile = the value, strict '>' keeps nothing -> agg 0
    reg = (0.0 - 0.5) ** 2
    assert out.loss.item() == pytest.approx(policy + 0.005 * reg, rel=1e-5)


def test_siren_policy_term_is_seq_mean_token_sum_norm():
    # two_response_batch: Dr. GRPO A = [+0.5, -0.5]; ratios r0 [1.5, 0.9], r1 [0.5, <pad>]; max_response_len 4
    h = torch.tensor([[1.0, 3.0], [2.0, 9.0]])  # the padded 9 must not count
    b = two_response_batch(topp_entropy=h, entropy_anchor=1.0)
    out = loss("siren", b, clip_low=0.2, clip_high=0.2, dual_clip=3.0, entropy_coef=0.005)
    # tokens: -min(1.5, 1.2)*0.5 = -0.6; -0.9*0.5 = -0.45; max(0.5*0.5, 0.8*0.5) = 0.4 (dual cap 1.5)
    # sum -0.65 / (2 * 4) = -0.08125 — a token mean would give -0.65 / 3 = -0.2167
    # regularizer: r0 quantile(0.8) of [1, 3] = 2.6 -> keeps 3; r1 has one real token -> keeps none (0)
    # agg = (3 + 0) / 2 = 1.5; (1.5 - 1.0)^2 = 0.25
    assert out.metrics["siren_entropy"] == pytest.approx(1.5)
    assert out.loss.item() == pytest.approx(-0.65 / 8 + 0.005 * 0.25, rel=1e-5)
    (g,) = torch.autograd.grad(out.loss, b.logp)
    # only the unclipped token r0 t1 moves: d(-A rho)/dlogp = -0.5 * 0.9, over 8
    assert torch.allclose(g, torch.tensor([[0.0, -0.45 / 8], [0.0, 0.0]]), atol=1e-7)
    b.max_response_len = 0
    with pytest.raises(ValueError, match="max_response_len"):
        loss("siren", b)


def test_dapo_reward_is_plus_minus_one_and_the_filter_reads_accuracy():
    from rlvr.data.records import Record
    from rlvr.rollout.groups import Group, shaped_rewards

    dapo = TrainParams(incorrect_reward=-1.0, overlong_buffer=4, max_response_tokens=8)
    # lengths 5 and 8 of max 8 (buffer 4 from 4): penalties -0.25 and -1
    assert shaped_rewards([True, False], [5, 8], dapo) == pytest.approx([0.75, -2.0])
    assert shaped_rewards([True, False], [2, 2], TrainParams(max_response_tokens=8)) == [1.0, 0.0]
    rec = Record("q", "p", "1", "x")
    # all wrong, uneven lengths: shaped rewards differ, accuracies do not -> no signal, filtered out
    wrong = Group(rec, [1], [[1] * 3, [1] * 8], [False, True], shaped_rewards([False, False], [3, 8], dapo),
                  [False, False])
    assert len(set(wrong.rewards)) == 2 and not wrong.informative
    assert Group(rec, [1], [[1], [1]], [False, False], [1.0, -1.0], [True, False]).informative


def test_warmup_is_linear_over_rollout_steps_and_starts_at_zero():
    from rlvr.training.deepspeed_engine import warmup_lr

    assert [warmup_lr(s, 1e-6, 5) for s in range(7)] == pytest.approx([0, 2e-7, 4e-7, 6e-7, 8e-7, 1e-6, 1e-6])
    assert warmup_lr(0, 1e-6, 0) == 1e-6


def test_peak_entropy_mask_equals_torch_quantile_per_response():
    """The batched mask is the per-response torch.quantile threshold, ties,
    single-token and empty responses included."""
    g = torch.Generator().manual_seed(3)
    h = torch.rand(7, 9, generator=g)
    h[1, :4] = 0.5  # ties
    mask = (torch.rand(7, 9, generator=g) > 0.3).float()
    mask[2] = 0.0  # empty
    mask[3] = 0.0
    mask[3, 5] = 1.0  # one token
    for q in (0.8, 0.5, 0.0, 1.0):
        expected = torch.zeros_like(mask)
        for i in range(7):
            real = mask[i] > 0
            if real.any():
                expected[i] = ((h[i] > torch.quantile(h[i][real], q)) & real).float()
        assert torch.equal(peak_entropy_mask(h, mask, q), expected), q


def test_the_registry_refuses_what_it_cannot_run():
    from rlvr.objectives.grpo import grpo
    from rlvr.objectives.policy_term import PolicyTermParams
    from rlvr.objectives.registry import register

    with pytest.raises(TypeError, match="ObjectiveParams dataclass"):
        register("no_settings", dict, examples=({},))
    with pytest.raises(TypeError, match="examples must be one or more dicts"):
        register("no_examples", PolicyTermParams, examples=())
    with pytest.raises(ValueError, match="registered twice"):
        register("grpo", PolicyTermParams, examples=({},))(lambda batch, p: None)
    assert objective("grpo").loss is grpo  # the refused one left it alone
    with pytest.raises(KeyError, match="unknown objective 'grpoo'"):
        objective("grpoo")


def test_an_objectives_own_checks_and_unknown_names_are_config_errors():
    from rlvr.schema import ConfigError
    from rlvr.settings.methods import parse_recipe

    raw = {"methods": {"a": {"objective": "disco", "form": "droo", "tau": -1.0},
                       "b": {"objective": "grpoo"},
                       "c": {"objective": "forking_80_20", "forking_top_ratio": 1.5, "clip_low": 0.2, "steps": 0}}}
    with pytest.raises(ConfigError) as e:
        parse_recipe(raw)
    msg = str(e.value)
    for needle in ("'methods.a.form' has unknown value 'droo' (did you mean 'dro'?)", "'methods.a.tau' must be > 0",
                   "'methods.b.objective' has unknown name 'grpoo' (did you mean 'grpo'?)",
                   "'methods.c.forking_top_ratio' must be in (0, 1)", "'methods.c.steps' must be >= 1"):
        assert needle in msg, needle


def test_disco_clipped_score_ablation_is_pessimistic_per_sign():
    # Q1 rewards [1, 0, 0]: ratios per token; eps 0.2 -> [0.8, 1.2]
    b = disco_batch()
    b.old_logp = b.logp.detach() - torch.log(torch.tensor([[1.5, 0.5], [1.5, 1.0], [0.5, 1.1],
                                                            [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]))
    s = scores(b, "lratio_clipped", clip_eps=0.2)
    # positive r0: min(r, clip r) = [1.2, 0.5] -> 0.85; negative r1 (one real token): max(1.5, 1.2) = 1.5;
    # negative r2: max(r, clip r) = [0.8, 1.1] -> 0.95
    assert s[:3].tolist() == pytest.approx([0.85, 1.5, 0.95])
    (g,) = torch.autograd.grad(s[:3].sum(), b.logp)
    # the clipped side carries no gradient: r0's first token and r2's first token are clipped
    assert g[0, 0] == 0 and g[2, 0] == 0 and g[0, 1] != 0 and g[1, 0] != 0 and g[2, 1] != 0


def test_disco_kl_penalty_ablation_is_linear_in_kl():
    d = 0.01
    out = loss("disco", disco_batch(old_shift=d), form="basic", constraint="penalty", kl_penalty_coef=0.5)
    base = loss("disco", disco_batch(), form="basic", constraint="penalty", kl_penalty_coef=0.5)
    assert out.metrics["kl_penalty"] == pytest.approx(0.5 * d, rel=1e-5)
    assert (out.loss - base.loss).item() == pytest.approx(0.5 * d, rel=1e-4)
    # inside the hinge's trust region the constraint is silent; the penalty is not
    inside = loss("disco", disco_batch(old_shift=5e-5), form="basic", delta=1e-4, constraint="penalty")
    assert inside.metrics["kl_penalty"] > 0
