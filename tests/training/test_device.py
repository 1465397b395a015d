"""Device discipline, seen on a CPU: the update path run with a model whose
weights report another device (tests/device_audit.py). A batch, a reward or a
reference log-prob left on the host is an op that mixes devices; reading a
device value is a host sync. Both are what fails or stalls on a GPU. Every
objective's whole update is audited by tests/objectives/test_objective_contract.py."""

import pytest
import torch
from device_audit import DeviceAudit, groups, update_for

from rlvr.objectives.registry import settings
from rlvr.training.packing import pack
from rlvr.training.policy import evaluate_tokens
from rlvr.training.step_metrics import PhaseTimer, StepMetrics


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


def test_the_reference_model_lives_on_the_device(device_model):
    """GRPO with a KL to a frozen reference: its log-probs are on the device too."""
    update = update_for(device_model, settings("grpo", kl_coef=0.1), ref_model=device_model)
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
