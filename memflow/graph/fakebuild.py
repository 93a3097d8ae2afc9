"""Build a model file's model as fake tensors (no memory), also where its ``__init__`` reads values.

Every prediction for a GPU this host does not have captures the step under ``FakeTensorMode``, and
builds the model there: each parameter a fake tensor. A model whose constructor reads a tensor's
values cannot be built that way (``DataDependentOutputException``): torch 2.13's
``nn.init.trunc_normal_`` calls ``.item()`` and loops on ``mask.any()`` (HF's ViT, DeiT, Swin), and
HF's ConvNeXt, Swin v2, PVT and two dozen others (and timm's models) compute their stochastic-depth
rates as ``torch.linspace(0, rate, n).tolist()``. :func:`build_fake` builds in fake mode as
before and, only where that fails on values, builds again on the meta device — where a tensor the
constructor makes on the CPU explicitly (``device="cpu"``, as those models do) is real and has its
values, and torch's own initialisers (the truncated normal too) skip meta parameters — then makes every parameter and buffer a
fake tensor of the same shape, strides and dtype (shared ones stay shared; a real buffer keeps its
values as a fake tensor of them). Fake tensors' values are never read, so the two builds capture the
same program.

Two more constructors fail in fake mode: a dtype or device conversion in ``build_model`` (``.double()``,
``.half()``, ``.to(torch.bfloat16)``; torch.ao's ``prepare_qat``) cannot swap a fake parameter for its
converted copy ("_apply(): Couldn't swap Linear.weight": fake tensors carry weak references), and a
lazy module's ``UninitializedParameter`` cannot be made of a fake tensor: both are built on the meta
device as above (a lazy module shaped there by its first forward on a meta batch, ``ModelSpec.build``).
A constructor that reads values the meta device has none of either (``parametrizations.orthogonal``
checks its matrix with ``allclose``) is built once for real on the host, as a plan for this host's CPUs
builds it, and its tensors made fake; where that fails too, the fake build's error is the one shown.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from .diagnose import quiet_fake

__all__ = ["build_fake"]


def _reads_values(e: BaseException) -> bool:
    """The build failed because a fake tensor has no values (``.item()``, ``.tolist()``, a branch on a
    tensor): the exception, or one it was raised from or during."""
    seen: set[int] = set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        if "DataDependent" in type(x).__name__:
            return True
        x = x.__cause__ or x.__context__
    return False


def _converts(e: BaseException) -> bool:
    """The build failed converting a fake parameter (``model.double()``, ``.to(dtype)``): torch could
    not swap it for its converted copy; or making a lazy module's ``UninitializedParameter`` of one."""
    seen: set[int] = set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        if "Couldn't swap" in str(x) or "UninitializedParameter" in str(x):
            return True
        x = x.__cause__ or x.__context__
    return False


def build_fake(spec: Any, mode: FakeTensorMode) -> nn.Module:
    """``spec.build()`` with fake parameters and buffers of ``mode`` (see the module's text)."""
    try:
        with mode, quiet_fake():
            model = spec.build()
        _to_fake(model, mode, foreign_only=True)
        return model
    except Exception as e:  # noqa: BLE001 - re-raised unless values or a conversion were the trouble
        if not (_reads_values(e) or _converts(e)):
            raise
        first = e
    try:
        with torch.device("meta"), quiet_fake():
            model = spec.build()
    except Exception:  # noqa: BLE001 - no values on meta either: built for real, once, on the host
        try:
            with quiet_fake():
                model = spec.build()
        except Exception:  # noqa: BLE001 - the fake build's error is the one to show
            raise first from None
    _to_fake(model, mode)
    return model


def _to_fake(model: nn.Module, mode: FakeTensorMode, foreign_only: bool = False) -> None:
    """Every parameter and buffer of ``model`` replaced, in place, by a fake tensor of ``mode``.
    ``foreign_only``: only the fake tensors of another mode. ``copy.deepcopy`` of a module built in fake
    mode (``nn.TransformerEncoder`` clones its layer so) gives the copies' tensors a mode of their own;
    each op on one then converts it into the running mode as a new storage, so a weight's ``t()``, which
    ``linear`` saves for its backward, counted as an allocation of the weight's bytes (a plain-torch
    encoder-decoder's fake step 17% above what its parameters streamed from the host hold)."""
    made: dict[int, torch.Tensor] = {}
    # the tensors replaced, held to the end: keyed by id, a dead one's id could be a later tensor's
    replaced: list = []

    def fake(t: torch.Tensor) -> torch.Tensor:
        if t.device.type == "meta" or foreign_only:
            with mode:
                return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                                           device="cpu" if t.device.type == "meta" else t.device)
        return mode.from_tensor(t)

    def skip(t: torch.Tensor) -> bool:
        return foreign_only and (not isinstance(t, FakeTensor) or t.fake_mode is mode)

    for mod in model.modules():
        for name, p in list(mod._parameters.items()):
            if p is None or skip(p):
                continue
            if id(p) not in made:
                made[id(p)] = nn.Parameter(fake(p.detach()), requires_grad=p.requires_grad)
                replaced.append(p)
            mod._parameters[name] = made[id(p)]
        for name, b in list(mod._buffers.items()):
            if b is None or skip(b):
                continue
            if id(b) not in made:
                made[id(b)] = fake(b)
                replaced.append(b)
            mod._buffers[name] = made[id(b)]
