"""The objective contract: every registered objective, with each of the example
settings its module declares (rlvr.objectives.registry), is run through the
same checks. A new objective module is covered with nothing else edited:

    pytest tests/objectives/test_objective_contract.py -k <name>

1. a finite loss, and a finite, non-zero gradient into the log-probs and into
   each entropy it regularizes, none into one it only reads;
2. what it declares it needs (Needs) is what it reads: it runs with only
   those batch fields, and fails without any one of them;
3. a mini-batch cut into loss calls gives the whole mini-batch's loss and
   gradient, unless it declares a per-call term (`Needs.per_call`, the
   official grain), whole groups per call where it needs them;
4. its whole update keeps every tensor on the device (tests/device_audit.py);
5. direction: on the policy's first update, a step raises the log-probability
   of each question's rewarded responses over its unrewarded ones, unless it
   declares itself a pure regularizer (`register(..., regularizer=True)`); a
   planted sign error (RLOO's baseline added, not subtracted) fails it.

A two-step CPU training of each objective's first example is in
tests/e2e/test_trainer.py (test_two_steps_of_every_objective).
"""

import dataclasses

import pytest
import torch
from device_audit import audited_update
from helpers import N_GROUPS, N, mini_batch, needed_only

from rlvr.objectives.base import LossOutput, MiniBatchTotals, Needs, PolicyBatch
from rlvr.objectives.policy_term import PolicyTermParams, policy_term
from rlvr.objectives.registry import examples, objective, register, unregister

EXAMPLES = examples()
IDS = [f"{name}-{i}" for name, i, _ in EXAMPLES]


def check_finite_loss_and_gradient(spec, hp) -> None:
    batch = needed_only(mini_batch(), hp.needs())
    out = spec.loss(batch, hp)
    assert isinstance(out, LossOutput) and out.loss.dim() == 0 and torch.isfinite(out.loss)
    assert all(v.dim() == 0 and not v.requires_grad for v in out.metrics.values()), out.metrics
    inputs = {"logp": batch.logp, **{k: getattr(batch, k) for k in ("entropy", "topp_entropy")
                                     if getattr(batch, k) is not None}}
    grads = dict(zip(inputs, torch.autograd.grad(out.loss, list(inputs.values()), allow_unused=True)))
    needs = hp.needs()
    assert grads["logp"] is not None and torch.isfinite(grads["logp"]).all() and grads["logp"].abs().sum() > 0
    for name in needs.entropies:
        g = grads[name]
        if name in needs.grad_entropies:
            assert g is not None and torch.isfinite(g).all() and g.abs().sum() > 0, f"no gradient into {name}"
        else:
            assert g is None or g.abs().sum() == 0, f"{name} is only read, but carries gradient"


def check_needs_are_what_it_reads(spec, hp) -> None:
    needs = hp.needs()
    assert needs.grad_entropies <= needs.entropies <= {"entropy", "topp_entropy"}
    full = mini_batch()
    spec.loss(needed_only(full, needs), hp)  # runs with what it declares
    declared = [name for name in ("entropy", "topp_entropy") if name in needs.entropies]
    declared += ["ref_logp"] * needs.reference_model + ["entropy_anchor"] * (needs.anchor is not None)
    for field in declared:
        with pytest.raises(ValueError):
            spec.loss(dataclasses.replace(needed_only(full, needs), **{field: None}), hp)


def call(batch: PolicyBatch, rows: list[int]) -> PolicyBatch:
    """The loss call holding `rows` of the mini-batch `batch`."""
    idx = torch.tensor(rows)
    totals = MiniBatchTotals(responses=batch.mask.shape[0], tokens=batch.mask.sum().item(),
                             groups=batch.mask.shape[0] // batch.group_size)
    pick = lambda t: None if t is None else t[idx]  # noqa: E731
    return dataclasses.replace(
        batch, logp=batch.logp[idx], old_logp=batch.old_logp[idx], mask=batch.mask[idx],
        rewards=batch.rewards[idx], group_rewards=batch.group_rows()[idx], ref_logp=pick(batch.ref_logp),
        entropy=pick(batch.entropy), topp_entropy=pick(batch.topp_entropy), totals=totals)


def loss_and_grads(spec, hp, batches: list[PolicyBatch], whole: PolicyBatch):
    loss = sum(spec.loss(b, hp).loss for b in batches)
    leaves = [whole.logp, whole.entropy, whole.topp_entropy]
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return loss.item(), [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads)]


def check_any_cut_of_a_mini_batch_gives_its_loss(spec, hp) -> None:
    whole = mini_batch()
    ref_loss, ref_grads = loss_and_grads(spec, hp, [whole], whole)
    if hp.needs().whole_groups:  # whole groups per call, in another order
        cuts = [[4, 5, 6, 7], [8, 9, 10, 11, 0, 1, 2, 3]]
    else:  # single responses, a group's rows spread over calls
        perm = torch.randperm(N_GROUPS * N, generator=torch.Generator().manual_seed(1)).tolist()
        cuts = [perm[:1], perm[1:6], perm[6:]]
    loss, grads = loss_and_grads(spec, hp, [call(whole, rows) for rows in cuts], whole)
    assert loss == pytest.approx(ref_loss, rel=1e-5, abs=1e-7)
    for g, ref in zip(grads, ref_grads):
        torch.testing.assert_close(g, ref, rtol=1e-5, atol=1e-7)
    assert ref_grads[0].abs().sum() > 0  # the case carries a gradient at all


def check_an_empty_response_keeps_it_finite(spec, hp) -> None:
    """An empty response (its mask all 0) and a one-token one in the batch: a
    per-sequence mean must not divide 0 by 0."""
    batch = needed_only(mini_batch(), hp.needs())
    mask = batch.mask.clone()
    mask[1], mask[6, 1:] = 0.0, 0.0
    batch = dataclasses.replace(batch, mask=mask)
    out = spec.loss(batch, hp)
    (grad,) = torch.autograd.grad(out.loss, [batch.logp], allow_unused=True)
    assert torch.isfinite(out.loss) and (grad is None or torch.isfinite(grad).all())


@pytest.mark.parametrize("name, index, hp", EXAMPLES, ids=IDS)
def test_a_finite_loss_and_gradient(name, index, hp):
    check_finite_loss_and_gradient(objective(name), hp)


@pytest.mark.parametrize("name, index, hp", EXAMPLES, ids=IDS)
def test_an_empty_response_keeps_the_loss_finite(name, index, hp):
    check_an_empty_response_keeps_it_finite(objective(name), hp)


@pytest.mark.parametrize("name, index, hp", EXAMPLES, ids=IDS)
def test_what_it_needs_is_what_it_reads(name, index, hp):
    check_needs_are_what_it_reads(objective(name), hp)


@pytest.mark.parametrize("name, index, hp", [e for e in EXAMPLES if not e[2].needs().per_call],
                         ids=[i for i, e in zip(IDS, EXAMPLES) if not e[2].needs().per_call])
def test_any_cut_of_a_mini_batch_gives_its_loss_and_gradient(name, index, hp):
    check_any_cut_of_a_mini_batch_gives_its_loss(objective(name), hp)


@pytest.mark.parametrize("layout", ["groups", "token_bins"])
@pytest.mark.parametrize("name, index, hp", EXAMPLES, ids=IDS)
def test_its_update_keeps_every_tensor_on_the_device(device_model, name, index, hp, layout):
    audited_update(device_model, hp, layout)


@pytest.mark.slow  # two gloo ranks
def test_a_call_gathered_over_ranks_is_the_whole_call(tmp_path):
    """Every objective that compares a group's responses, on 2 real gloo ranks
    that each hold half the mini-batch (groups split between them) and gather
    the call's rows: the ranks' losses add up to the whole call's loss, and
    each rank's gradient is the whole call's gradient of its rows (what
    train.sequences_per_call runs, DisCO's official grain)."""
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    here = Path(__file__).parents[1]  # tests/: gather_worker.py and the helpers it imports
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2",
           "PYTHONPATH": os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, str(here / "gather_worker.py"), str(tmp_path)],
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in (0, 1)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    checked = [(name, i, hp) for name, i, hp in EXAMPLES if hp.needs().whole_groups]
    assert checked and set(ranks[0]) == {f"{name}-{i}" for name, i, _ in checked}
    for name, i, hp in checked:
        whole = needed_only(mini_batch(), hp.needs())
        loss = objective(name).loss(whole, hp).loss
        (grad,) = torch.autograd.grad(loss, whole.logp)
        key = f"{name}-{i}"
        assert ranks[0][key]["loss"] + ranks[1][key]["loss"] == pytest.approx(loss.item(), rel=1e-5, abs=1e-7), key
        torch.testing.assert_close(torch.cat([ranks[0][key]["grad"], ranks[1][key]["grad"]]), grad,
                                   rtol=1e-5, atol=1e-7)


# ---- a new objective is covered with nothing else edited --------------------------------------------


@dataclasses.dataclass
class ThrowawayParams(PolicyTermParams):
    bonus: float = 0.1  # weight of the mean entropy subtracted

    def needs(self) -> Needs:
        return Needs(entropies=frozenset({"entropy"}), grad_entropies=frozenset({"entropy"}))


def throwaway(batch: PolicyBatch, p: ThrowawayParams) -> LossOutput:
    if batch.entropy is None:
        raise ValueError("throwaway reads the entropy")
    loss, metrics = policy_term(batch, p)
    h = (batch.entropy * batch.mask).sum() / batch.total_tokens
    return LossOutput(loss - p.bonus * h, metrics)


def undeclared(batch: PolicyBatch, p: PolicyTermParams) -> LossOutput:
    """Reads the entropy it never asked for: the trainer would pass None."""
    return LossOutput(policy_term(batch, p)[0] - 0.1 * batch.entropy.mean(), {})


def test_a_registered_objective_is_in_the_suite_and_one_that_lies_fails_it(request, device_model):
    register("throwaway", ThrowawayParams, examples=({}, {"bonus": 0.5, "ratio": "sequence"}))(throwaway)
    register("undeclared", PolicyTermParams, examples=({},))(undeclared)
    request.addfinalizer(lambda: [unregister(n) for n in ("throwaway", "undeclared")])
    found = [(name, hp) for name, _, hp in examples() if name in ("throwaway", "undeclared")]
    assert [(name, type(hp).__name__) for name, hp in found] == [
        ("throwaway", "ThrowawayParams"), ("throwaway", "ThrowawayParams"), ("undeclared", "PolicyTermParams")]
    spec = objective("throwaway")
    for _, hp in found[:2]:
        check_finite_loss_and_gradient(spec, hp)
        check_an_empty_response_keeps_it_finite(spec, hp)
        check_needs_are_what_it_reads(spec, hp)
        check_any_cut_of_a_mini_batch_gives_its_loss(spec, hp)
        audited_update(device_model, hp, "groups")
    with pytest.raises((AttributeError, TypeError)):  # batch.entropy is None: it did not declare it
        check_needs_are_what_it_reads(objective("undeclared"), found[2][1])


# ---- 5. direction: a step moves probability toward the rewarded responses -------------


def on_policy(batch):
    """The batch at its first update: the policy is pi_old and the reference (ratio 1, KL 0)."""
    return dataclasses.replace(batch, old_logp=batch.logp.detach().clone(), ref_logp=batch.logp.detach().clone())


def rewarded_rise(spec, hp, seed: int = 0) -> float:
    """One gradient-descent step on the log-probs, then per question the mean change of a
    rewarded response's log-probability minus an unrewarded one's, summed over questions."""
    batch = needed_only(on_policy(mini_batch(seed)), hp.needs())
    spec.loss(batch, hp).loss.backward()
    change = (-batch.logp.grad * batch.mask).sum(1).view(-1, N)
    rewarded = batch.rewards.view(-1, N) > 0
    return float(sum(c[r].mean() - c[~r].mean() for c, r in zip(change, rewarded) if r.any() and (~r).any()))


DIRECTED = [e for e in EXAMPLES if not objective(e[0]).regularizer]


@pytest.mark.parametrize("name, i, hp", DIRECTED, ids=[f"{n}-{i}" for n, i, _ in DIRECTED])
def test_a_step_raises_the_rewarded_responses(name, i, hp):
    """Every objective that is not a declared pure regularizer moves probability toward the
    rewarded responses of a question and away from the others, on three batches."""
    rises = [rewarded_rise(objective(name), hp, seed) for seed in range(3)]
    assert all(r > 0 for r in rises), f"{name} example {i}: rewarded minus unrewarded log-prob change {rises}"


@dataclasses.dataclass
class RlooParams(PolicyTermParams):
    pass


def rloo_loss(sign: float):
    """REINFORCE with a leave-one-out baseline: A = r - mean of the others (sign -1 plants the
    sign error A = r + mean of the others)."""
    def loss(batch: PolicyBatch, p: RlooParams) -> LossOutput:
        r = batch.rewards.view(-1, batch.group_size)
        others = (r.sum(1, keepdim=True) - r) / (batch.group_size - 1)
        adv = (r + sign * others).reshape(-1, 1)
        seq = (batch.logp * batch.mask).sum(1, keepdim=True)
        return LossOutput(-(adv * seq).mean())
    return loss


@pytest.mark.parametrize("sign, rises", [(-1.0, True), (1.0, False)], ids=["rloo", "rloo_sign_flipped"])
def test_the_direction_check_catches_a_sign_error(sign, rises):
    register("rloo_probe", RlooParams, examples=({},))(rloo_loss(sign))
    try:
        spec = objective("rloo_probe")
        assert all(rewarded_rise(spec, hp, seed) > 0 for hp in spec.example_settings() for seed in range(3)) == rises
    finally:
        unregister("rloo_probe")
