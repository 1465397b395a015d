"""A CPU stand-in for a GPU that sees device mistakes.

`OnDevice` tensors keep their data on the CPU but report the `meta` device,
as a CUDA tensor reports cuda: code that follows `x.device` makes more of
them, code that forgets the device makes plain CPU tensors. Inside a
`DeviceAudit`, every op whose tensor arguments mix the two is recorded (a
0-dim CPU tensor is legal, as it is on CUDA), and so is every host sync (a
read of a device value: `.item()`, `bool(t)`, a boolean-mask index). Ops run
for real on the CPU data, so `.item()` works and the numbers are the same.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

DEVICE = torch.device("meta")
SYNCS = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.nonzero.default,
         torch.ops.aten.masked_select.default, torch.ops.aten.is_nonzero.default}
_active: list["DeviceAudit"] = []  # autograd may run backward ops on its own thread, outside the mode


class OnDevice(torch.Tensor):
    data_: torch.Tensor

    @staticmethod
    def __new__(cls, data: torch.Tensor, requires_grad: bool = False):
        t = torch.Tensor._make_wrapper_subclass(cls, data.shape, strides=data.stride(),
                                                storage_offset=data.storage_offset(), dtype=data.dtype,
                                                device=DEVICE, requires_grad=requires_grad)
        t.data_ = data
        return t

    def __repr__(self):
        return f"OnDevice({self.data_!r})"

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _run(_active[-1] if _active else None, func, args, kwargs or {})


def _run(audit, func, args, kwargs):
    flat, _ = tree_flatten((args, kwargs))
    tensors = [a for a in flat if isinstance(a, torch.Tensor)]
    on_device = any(isinstance(t, OnDevice) for t in tensors)
    on_host = [t for t in tensors if not isinstance(t, OnDevice) and t.dim() > 0]
    if audit is not None:
        if on_device and on_host:
            audit.mixed.append(f"{func} with host tensors of shapes {[tuple(t.shape) for t in on_host]}")
        if on_device and func in SYNCS:
            audit.syncs.append(_site())
    to_host = func is torch.ops.aten._to_copy.default and kwargs.get("device") is not None \
        and torch.device(kwargs["device"]).type == "cpu"
    if to_host and on_device:  # a copy back to the host: a sync, and a plain CPU tensor
        if audit is not None:
            audit.syncs.append(_site())
        return func(*tree_map(_unwrap, args), **kwargs)
    made_here = "device" in kwargs and kwargs["device"] is not None and torch.device(kwargs["device"]).type == "meta"
    if made_here:
        kwargs = {**kwargs, "device": torch.device("cpu")}
    wrappers = {id(a.data_): a for a in tensors if isinstance(a, OnDevice)}
    out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
    if not (on_device or made_here):
        return out
    # in-place ops return their own argument: give back the same wrapper
    return tree_map(lambda x: _wrapped(x, wrappers) if isinstance(x, torch.Tensor) else x, out)


def _wrapped(x: torch.Tensor, wrappers: dict) -> torch.Tensor:
    return wrappers[id(x)] if id(x) in wrappers else OnDevice(x)


def _site() -> str:
    """Where a sync comes from: the innermost frame outside torch and this file,
    as file:function of the project, or the library that made it."""
    frames = [f for f in traceback.extract_stack()
              if "/torch/" not in f.filename and not f.filename.endswith("device_audit.py")]
    last = frames[-1] if frames else None
    if last is None or "site-packages" in last.filename:
        return f"library:{Path(last.filename).name}" if last else "elsewhere"
    return f"{Path(last.filename).name}:{last.name}"


def _made_on_device(make):
    def made(data, *args, device=None, **kwargs):
        if device is not None and torch.device(device).type == "meta":
            return OnDevice(make(data, *args, **kwargs))
        return make(data, *args, device=device, **kwargs)

    return made


def _unwrap(x):
    return x.data_ if isinstance(x, OnDevice) else x


class DeviceAudit(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.mixed: list[str] = []
        self.syncs: list[str] = []

    def __enter__(self):
        _active.append(self)
        # torch.tensor(data, device=meta) makes its tensor without a dispatched
        # op (its data would be lost): route it through the CPU.
        self._tensor, self._as_tensor = torch.tensor, torch.as_tensor
        torch.tensor = _made_on_device(self._tensor)
        torch.as_tensor = _made_on_device(self._as_tensor)
        return super().__enter__()

    def __exit__(self, *exc):
        _active.remove(self)
        torch.tensor, torch.as_tensor = self._tensor, self._as_tensor
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return _run(self, func, args, kwargs or {})


def to_device(module: torch.nn.Module) -> torch.nn.Module:
    """The module's parameters and buffers as OnDevice tensors (in place)."""
    for sub in module.modules():
        for name, p in list(sub._parameters.items()):
            if p is not None:
                sub._parameters[name] = torch.nn.Parameter(OnDevice(p.detach().clone(), p.requires_grad),
                                                           requires_grad=p.requires_grad)
        for name, b in list(sub._buffers.items()):
            if b is not None:
                sub._buffers[name] = OnDevice(b.clone())
    return module


# ---- an update under the audit ---------------------------------------------------------------------


class PlainEngine:
    """What the update needs of DeepSpeed's engine, for a plain module."""

    def __init__(self, module):
        self.module = module

    def backward(self, loss, scale_wrt_gas=True):
        loss.backward()

    def step(self):
        pass


def audit_model():
    """A 2-layer Llama whose weights report the `meta` device (data on the CPU)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                      tie_word_embeddings=True)
    torch.manual_seed(0)
    return to_device(LlamaForCausalLM(cfg).float())


def groups(n_groups=4, n=4, seed=0):
    from rlvr.rollout.groups import Group

    g = torch.Generator().manual_seed(seed)
    out = []
    for q in range(n_groups):
        prompt = torch.randint(3, 300, (5 + q,), generator=g).tolist()
        responses = [torch.randint(3, 300, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g).tolist()
                     for _ in range(n)]
        correct = [i % 2 == q % 2 for i in range(n)] if q < n_groups - 1 else [True] * n  # one all-equal group
        out.append(Group(None, prompt, responses, [False] * n, [float(c) for c in correct], correct))
    return out


def update_for(model, hp, ref_model=None, **train):
    """The trainer's update of objective settings `hp` on `model`, on the `meta` device."""
    from rlvr.distributed import Ranks
    from rlvr.objectives.registry import objective
    from rlvr.settings.train import TrainParams
    from rlvr.training.update import PolicyUpdate

    t = TrainParams(questions_per_step=4, responses_per_question=4, mini_batch_questions=2, micro_batch_questions=1,
                    max_response_tokens=8, **train)
    if ref_model is None and hp.needs().reference_model:
        ref_model = model  # reference log-probs are a pass of their own on the device
    return PolicyUpdate(PlainEngine(model), objective(hp.objective).loss, hp, t, pad_id=0, ranks=Ranks(),
                        device=torch.device("meta"), ref_model=ref_model)


# What may read a device value besides the non-finite-loss guard: the top-p probe of the
# measured entropy (a data-dependent sort width), SIREN's anchor on its first step, KL-Cov's
# and Clip-Cov's token budgets (official: a count of the batch's tokens).
ALLOWED_SYNCS = {"update.py:_loss_call", "entropy.py:topp_entropy", "siren.py:anchor_value", "kl_cov.py:kl_cov",
                 "clip_cov.py:clip_cov"}


def audited_update(model, hp, layout: str) -> None:
    """The whole update of `hp`'s objective (pi_old pass, loss calls, backward)
    on the device, with whole-group calls ("groups") or token-budget bins
    ("token_bins"): no op mixes host and device tensors, and no host sync per
    loss call beyond the non-finite-loss guard and ALLOWED_SYNCS."""
    from rlvr.training.step_metrics import PhaseTimer, StepMetrics

    whole = hp.needs().whole_groups  # a bin holds a whole group (4 responses of 16 tokens)
    budget = {"max_tokens_per_call": 4 * 16 if whole else 30} if layout == "token_bins" else {}
    update = update_for(model, hp, **budget)
    metrics = StepMetrics()
    anchor = None if hp.needs().anchor else 0.5
    model.zero_grad()
    with DeviceAudit() as audit:
        anchor = update.run(groups(), position=0, anchor=anchor, metrics=metrics, timer=PhaseTimer())
    assert audit.mixed == [], audit.mixed
    calls = metrics.totals["loss_calls"]
    assert calls == 4 if layout == "groups" else calls >= 4  # 4 groups, one per call; or bins
    ours = [s for s in audit.syncs if not s.startswith("library:")]  # transformers' own mask check is not ours
    # the non-finite-loss guard, on every call with a gradient (a silent one has none to guard)
    assert ours.count("update.py:_loss_call") == calls - metrics.totals["silent_calls"]
    assert set(ours) <= ALLOWED_SYNCS, sorted(set(ours) - ALLOWED_SYNCS)
    row = metrics.reduce()  # read once per step
    assert row["loss"] == row["loss"] and "kl" in row
    assert all(p.grad is None or p.grad.device.type == "meta" for p in model.parameters())
    assert any(p.grad is not None and p.grad.data_.abs().sum() > 0 for p in model.parameters())
    if hp.needs().anchor:
        assert anchor is not None and anchor > 0
