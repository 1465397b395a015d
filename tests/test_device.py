"""Device discipline, seen on a CPU: the update path run with a model whose
weights report another device (tests/device_audit.py). A batch, a reward or a
reference log-prob left on the host is an op that mixes devices; reading a
device value is a host sync. Both are what fails or stalls on a GPU."""

import pytest
import torch

from device_audit import DeviceAudit, to_device
from rlvr.config import TrainParams
from rlvr.distributed import Ranks
from rlvr.rollout_groups import Group
from rlvr.objectives.registry import objective, settings
from rlvr.policy import evaluate_tokens, pack
from rlvr.step_metrics import StepMetrics
from rlvr.trainer import PhaseTimer
from rlvr.update import PolicyUpdate


class PlainEngine:
    """What the update needs of DeepSpeed's engine, for a plain module."""

    def __init__(self, module):
        self.module = module

    def backward(self, loss, scale_wrt_gas=True):
        loss.backward()

    def step(self):
        pass


@pytest.fixture(scope="module")
def device_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                      tie_word_embeddings=True)
    torch.manual_seed(0)
    return to_device(LlamaForCausalLM(cfg).float())


def groups(n_groups=4, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for q in range(n_groups):
        prompt = torch.randint(3, 300, (5 + q,), generator=g).tolist()
        responses = [torch.randint(3, 300, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g).tolist()
                     for _ in range(n)]
        correct = [i % 2 == q % 2 for i in range(n)] if q < n_groups - 1 else [True] * n  # one all-equal group
        out.append(Group(None, prompt, responses, [False] * n, [float(c) for c in correct], correct))
    return out


OBJECTIVE_SETTINGS = {
    "grpo": {}, "grpo_rw": {}, "grpo_er": {"entropy_coef": 0.01}, "dr_grpo": {"dual_clip": 3.0},
    "dapo": {"clip_high": 0.28, "dual_clip": 10.0}, "disco": {"score": "lratio", "form": "dro", "tau": 1.0},
    "siren": {"dual_clip": 3.0, "entropy_coef": 0.005, "entropy_top_k": 50},
    "entropy_reg": {"entropy_coef": 0.005}, "clip_cov": {}, "kl_cov": {}, "entropy_adv": {}, "forking_80_20": {},
    "trpa": {},
}


def update_for(model, name: str, ref_model=None, kl_coef: float | None = None, **train) -> PolicyUpdate:
    hp = settings(name, **OBJECTIVE_SETTINGS[name], **({} if kl_coef is None else {"kl_coef": kl_coef}))
    t = TrainParams(questions_per_step=4, responses_per_question=4, mini_batch_questions=2, micro_batch_questions=1,
                    max_response_tokens=8, **train)
    if ref_model is None and hp.needs().reference_model:
        ref_model = model  # TRPA's scores: its reference log-probs are a pass of their own on the device
    return PolicyUpdate(PlainEngine(model), objective(name).loss, hp, t, pad_id=0, ranks=Ranks(),
                        device=torch.device("meta"), ref_model=ref_model)


def test_the_audit_flags_a_batch_left_on_the_host(device_model):
    """The mistake of a trainer that feeds CPU batches to a GPU model is seen
    (this was the trainer's path before batches were moved: pack -> module)."""
    packed = pack([[5, 6, 7]] * 2, [[20, 21], [30]], 0, group_size=2)
    with DeviceAudit() as audit:
        evaluate_tokens(device_model, packed, 1.0)
    assert any("embedding" in m for m in audit.mixed), audit.mixed
    with DeviceAudit() as audit:
        out = evaluate_tokens(device_model, packed.to(torch.device("meta")), 1.0)
    assert audit.mixed == [] and out["logp"].device.type == "meta"


@pytest.mark.parametrize("layout", ["groups", "token_bins"])
@pytest.mark.parametrize("objective", list(OBJECTIVE_SETTINGS))
def test_the_update_keeps_every_tensor_on_the_device(device_model, objective, layout):
    """Every objective's whole update (pi_old pass, loss calls, backward) on the
    device, with whole-group calls and with token-budget bins, and no host sync
    per loss call beyond the non-finite-loss guard for the objectives whose
    official form needs none."""
    whole = settings(objective).needs().whole_groups  # a bin holds a whole group (4 responses of 16 tokens)
    budget = {"max_tokens_per_call": 4 * 16 if whole else 30} if layout == "token_bins" else {}
    update = update_for(device_model, objective, **budget)
    metrics = StepMetrics()
    anchor = None if objective == "siren" else 0.5
    device_model.zero_grad()
    with DeviceAudit() as audit:
        anchor, _ = update.run(groups(), position=0, anchor=anchor, metrics=metrics, timer=PhaseTimer())
    assert audit.mixed == [], audit.mixed
    calls = metrics.totals["loss_calls"]
    assert calls == 4 if layout == "groups" else calls >= 4  # 4 groups, one per call; or bins
    ours = [s for s in audit.syncs if not s.startswith("library:")]  # transformers' own mask check is not ours
    assert ours.count("update.py:_loss_call") == calls  # the non-finite-loss guard
    # Besides the guard: the top-p probe of the measured entropy (data-dependent
    # sort width), SIREN's anchor on its first step, KL-Cov's and Clip-Cov's
    # token budgets (official: a count of the batch's tokens).
    allowed = {"update.py:_loss_call", "policy.py:topp_entropy", "siren.py:anchor_value",
               "kl_cov.py:kl_cov", "clip_cov.py:clip_cov"}
    assert set(ours) <= allowed, sorted(set(ours) - allowed)
    row = metrics.reduce()  # read once per step
    assert row["loss"] == row["loss"] and "kl" in row
    assert all(p.grad is None or p.grad.device.type == "meta" for p in device_model.parameters())
    assert any(p.grad is not None and p.grad.data_.abs().sum() > 0 for p in device_model.parameters())
    if objective == "siren":
        assert anchor is not None and anchor > 0


def test_the_reference_model_lives_on_the_device(device_model):
    """GRPO with a KL to a frozen reference: its log-probs are on the device too."""
    update = update_for(device_model, "grpo", ref_model=device_model, kl_coef=0.1)
    with DeviceAudit() as audit:
        update.run(groups(), position=0, anchor=None, metrics=StepMetrics(), timer=PhaseTimer())
    assert audit.mixed == []


def test_step_metrics_read_device_values_once():
    """Device values summed in float64 on the device, read with one copy per step."""
    m = StepMetrics()
    from device_audit import OnDevice

    with DeviceAudit() as audit:
        for v in (0.25, 0.5, 1.0):
            m.add_loss_call({"loss": OnDevice(torch.tensor(v)), "kl": 0.1})
        row = m.reduce()
    assert row["loss"] == pytest.approx(1.75 / 3) and row["kl"] == pytest.approx(0.1)
    assert audit.syncs == ["step_metrics.py:_on_host"]
