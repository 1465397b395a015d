"""A loss call whose groups all have equal rewards skips its backward where the
objective declares that its gradient is exactly zero (Needs.silent_uniform_groups).
The skip must change nothing: the same update with and without it gives the same
weights after every optimizer step and the same step metrics, for every
registered example that declares it; and the declaration itself must be true."""

import copy

import pytest
import torch

from rlvr.distributed import Ranks
from rlvr.objectives.registry import examples, objective
from rlvr.rollout.groups import Group
from rlvr.settings.train import TrainParams
from rlvr.training.step_metrics import PhaseTimer, StepMetrics
from rlvr.training.update import PolicyUpdate

EXAMPLES = examples()
SILENT = [(name, i, hp) for name, i, hp in EXAMPLES if hp.needs().silent_uniform_groups != "never"]
NEVER = [(name, i, hp) for name, i, hp in EXAMPLES if hp.needs().silent_uniform_groups == "never"]


class SGDEngine:
    """DeepSpeed's engine as the update uses it, on a plain module, with a real step:
    the second mini-batch then runs on a policy that is no longer pi_old."""

    def __init__(self, module, lr=0.5):
        self.module = module
        self.optimizer = torch.optim.SGD(module.parameters(), lr=lr)

    def backward(self, loss, scale_wrt_gas=True):
        loss.backward()

    def step(self):
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=False)


def tiny_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                      tie_word_embeddings=True)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).float()


def step_groups(n=4):
    """4 groups in 2 mini-batches: an all-wrong group first (on-policy), an
    all-correct one last (after an optimizer step), two mixed ones between."""
    g = torch.Generator().manual_seed(1)
    correct = [[False] * n, [i % 2 == 0 for i in range(n)], [i < 1 for i in range(n)], [True] * n]
    out = []
    for q, c in enumerate(correct):
        prompt = torch.randint(3, 300, (5 + q,), generator=g).tolist()
        responses = [torch.randint(3, 300, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g).tolist()
                     for _ in range(n)]
        out.append(Group(None, prompt, responses, [False] * n, [float(x) for x in c], c))
    return out


def run_update(hp, model, skip: bool, monkeypatch) -> tuple[dict, dict]:
    train = TrainParams(questions_per_step=4, responses_per_question=4, mini_batch_questions=2,
                        micro_batch_questions=1, max_response_tokens=8, temperature=0.9)
    ref = copy.deepcopy(model) if hp.needs().reference_model else None
    update = PolicyUpdate(SGDEngine(model), objective(hp.objective).loss, hp, train, pad_id=0, ranks=Ranks(),
                          device=torch.device("cpu"), ref_model=ref)
    if not skip:
        monkeypatch.setattr(PolicyUpdate, "silent", lambda self, rows, on_policy: False)
    metrics = StepMetrics()
    anchor = 0.5 if hp.needs().anchor else None
    update.run(step_groups(), position=0, anchor=anchor, metrics=metrics, timer=PhaseTimer())
    monkeypatch.undo()
    return metrics.reduce(), {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name, index, hp", SILENT, ids=[f"{n}-{i}" for n, i, _ in SILENT])
def test_the_skip_changes_no_weight_and_no_metric(name, index, hp, monkeypatch):
    model = tiny_model()
    skipped, after_skip = run_update(hp, copy.deepcopy(model), True, monkeypatch)
    full, after_full = run_update(hp, copy.deepcopy(model), False, monkeypatch)
    assert full["silent_calls"] == 0
    # the on-policy all-wrong group always; the all-correct one after the step too where declared "always"
    assert skipped["silent_calls"] == (2 if hp.needs().silent_uniform_groups == "always" else 1)
    for key, value in after_full.items():
        assert torch.equal(after_skip[key], value), key
    assert not torch.equal(after_full["model.norm.weight"], model.state_dict()["model.norm.weight"])  # it moved
    for key in ("loss", "kl", "entropy", "topp_entropy", "perplexity", "train_tokens", "loss_calls"):
        assert skipped[key] == full[key], key


@pytest.mark.parametrize("name, index, hp", NEVER, ids=[f"{n}-{i}" for n, i, _ in NEVER])
def test_an_objective_that_reads_every_response_never_skips(name, index, hp, monkeypatch):
    metrics, _ = run_update(hp, tiny_model(), True, monkeypatch)
    assert metrics["silent_calls"] == 0


def uniform_call_gradient(hp, off_policy: bool) -> torch.Tensor:
    """The gradient into the log-probs of one all-wrong group's loss call, on pi_old or off it."""
    from helpers import mini_batch, needed_only

    batch = needed_only(mini_batch(), hp.needs())
    n = batch.group_size
    batch.rewards = torch.zeros_like(batch.rewards)  # every group all wrong
    batch.group_rewards = None if batch.group_rewards is None else torch.zeros_like(batch.group_rewards)
    batch.levels = None
    logp = batch.logp.detach().clone().requires_grad_(True)
    batch.logp = logp
    batch.old_logp = logp.detach() + (0.3 * torch.ones_like(logp) if off_policy else 0.0)
    assert batch.rewards.shape[0] % n == 0
    grad, = torch.autograd.grad(objective(hp.objective).loss(batch, hp).loss, logp, allow_unused=True)
    return torch.zeros_like(logp) if grad is None else grad


@pytest.mark.parametrize("name, index, hp", SILENT, ids=[f"{n}-{i}" for n, i, _ in SILENT])
def test_the_declaration_holds(name, index, hp):
    """An all-equal group's gradient is exactly 0 on pi_old; off it too where declared "always"."""
    assert torch.count_nonzero(uniform_call_gradient(hp, off_policy=False)) == 0
    if hp.needs().silent_uniform_groups == "always":
        assert torch.count_nonzero(uniform_call_gradient(hp, off_policy=True)) == 0


def test_disco_off_policy_is_not_silent():
    """Why DisCO declares "on_policy": past an optimizer step its KL hinge is active
    (KL 0.3 > delta) and moves every response of an all-equal group."""
    hp = objective("disco").params(objective="disco", delta=1e-4, beta=1e3)
    assert hp.needs().silent_uniform_groups == "on_policy"
    assert torch.count_nonzero(uniform_call_gradient(hp, off_policy=True)) > 0
