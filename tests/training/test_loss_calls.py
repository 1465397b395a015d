"""How a mini-batch is cut into loss calls changes the objectives that take a
term per call, their official grain (`Needs.per_call`: SIREN's anchor term,
DisCO's KL hinge, Clip-Cov and KL-Cov budgets), shown on hand-computed
cases. That the others give the same loss and gradient however the
mini-batch is cut is checked for every objective by
tests/objectives/test_objective_contract.py."""

import dataclasses

import pytest
import torch

from rlvr.objectives.base import MiniBatchTotals, PolicyBatch
from rlvr.objectives.registry import objective, settings

N_GROUPS, N, T = 3, 4, 6


def mini_batch(seed: int = 0) -> PolicyBatch:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (N_GROUPS * N,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    rewards = torch.tensor([1.0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0])
    return PolicyBatch(
        logp=(-torch.rand(N_GROUPS * N, T, generator=g) * 2).requires_grad_(),
        old_logp=-torch.rand(N_GROUPS * N, T, generator=g) * 2, mask=mask, rewards=rewards, group_size=N,
        max_response_len=T, ref_logp=-torch.rand(N_GROUPS * N, T, generator=g) * 2,
        entropy=(torch.rand(N_GROUPS * N, T, generator=g) * 3).requires_grad_(),
    )


def call(batch: PolicyBatch, rows: list[int]) -> PolicyBatch:
    """The loss call holding `rows` of the mini-batch `batch`."""
    idx = torch.tensor(rows)
    totals = MiniBatchTotals(responses=batch.mask.shape[0], tokens=batch.mask.sum().item(),
                             groups=batch.mask.shape[0] // batch.group_size)
    return dataclasses.replace(
        batch, logp=batch.logp[idx], old_logp=batch.old_logp[idx], mask=batch.mask[idx],
        rewards=batch.rewards[idx], group_rewards=batch.group_rows()[idx], ref_logp=batch.ref_logp[idx],
        entropy=batch.entropy[idx], totals=totals)


def loss_and_grads(name: str, batches: list[PolicyBatch], whole: PolicyBatch, **values):
    hp = settings(name, **values)
    fn = objective(hp.objective).loss
    loss = sum(fn(b, hp).loss for b in batches)
    grads = torch.autograd.grad(loss, [whole.logp, whole.entropy], allow_unused=True)
    return loss.item(), [torch.zeros_like(whole.logp) if g is None else g for g in grads]


def test_disco_takes_its_kl_hinge_per_call():
    # DisCO's squared hinge is per loss call (the official grain): with it on, the cut matters
    whole = mini_batch()
    whole.old_logp = whole.logp.detach() + 0.5  # KL (mean of old - new) 0.5, far above delta: the hinge is active
    one, _ = loss_and_grads("disco", [whole], whole, beta=1000.0)
    two, _ = loss_and_grads("disco", [call(whole, list(range(4))), call(whole, list(range(4, 12)))], whole,
                            beta=1000.0)
    assert one == pytest.approx(two, rel=1e-6)  # equal KL in every call: the weighted hinges add up
    whole.old_logp[:4] = whole.logp.detach()[:4]  # the first group's KL is 0, the rest's 0.5
    one, _ = loss_and_grads("disco", [whole], whole, beta=1000.0)
    two, _ = loss_and_grads("disco", [call(whole, list(range(4))), call(whole, list(range(4, 12)))], whole,
                            beta=1000.0)
    assert one != pytest.approx(two, rel=1e-3)


def test_siren_anchor_term_per_bin_differs_from_per_group_by_hand():
    """Two responses of one group, rewards equal (A = 0: the policy term is 0).
    Top-p entropies [1 2 3 4 5] and [1 1 1 1 3]: the 0.8 quantiles are 4.2 and
    1.4, so each keeps its last token: per-response means 5 and 3; anchor 3.
    One call: agg = (5 + 3) / 2 = 4, reg = (4 - 3)^2 = 1.
    One bin per response: (5 - 3)^2 * 1/2 + (3 - 3)^2 * 1/2 = 2."""
    h = torch.tensor([[1.0, 2, 3, 4, 5], [1, 1, 1, 1, 3]])
    batch = PolicyBatch(logp=torch.zeros(2, 5), old_logp=torch.zeros(2, 5), mask=torch.ones(2, 5),
                        rewards=torch.ones(2), group_size=2, max_response_len=5, topp_entropy=h,
                        entropy_anchor=3.0)
    hp = settings("siren", entropy_coef=1.0, dual_clip=3.0)
    assert objective("siren").loss(batch, hp).loss.item() == pytest.approx(1.0)
    totals = MiniBatchTotals(responses=2, tokens=10, groups=1)
    bins = [dataclasses.replace(batch, logp=batch.logp[i:i + 1], old_logp=batch.old_logp[i:i + 1],
                                mask=batch.mask[i:i + 1], rewards=batch.rewards[i:i + 1],
                                group_rewards=torch.ones(1, 2), topp_entropy=h[i:i + 1], totals=totals)
            for i in (0, 1)]
    assert sum(objective("siren").loss(b, hp).loss.item() for b in bins) == pytest.approx(2.0)
