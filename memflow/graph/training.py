"""What a training step needs besides its program, shared by the tracer and the executor.

The parameters in the order a training script hands them to its optimizer
(``model.parameters()``), the gradient layout autograd gives a dense
parameter, and the training precision's autocast. The profiler and the
executor both step the optimizer through these, so the traced step is the
executed one.
"""
from __future__ import annotations

import contextlib

import torch

from ..errors import CaptureError
from ..kinds import TRAIN_DTYPES
from .gpu_autocast import CudaAutocast
from .tp import origin_of

__all__ = ["unique_params", "in_model_order", "opt_params", "grad_meta", "dense_grad", "casts", "autocast",
           "gpu_semantics"]

# the device whose autocast a trace on the CPU stands for ("cuda" inside :func:`gpu_semantics`); a module
# global, so the processes a capture forks trace the same way
_TARGET = "cpu"


@contextlib.contextmanager
def gpu_semantics(on: bool = True):
    """Within: the CPU's autocast (:func:`autocast` on ``cpu``) casts as CUDA's does
    (:mod:`memflow.graph.gpu_autocast`), for a fake trace that predicts a GPU."""
    global _TARGET
    old, _TARGET = _TARGET, ("cuda" if on else _TARGET)
    try:
        yield
    finally:
        _TARGET = old


def unique_params(module: torch.nn.Module) -> list[torch.nn.Parameter]:
    """``module``'s parameters, each once (a tied parameter at its first place)."""
    seen, out = set(), []
    for p in module.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out


def in_model_order(model: torch.nn.Module, params: list) -> list:
    """``params`` in ``model``'s parameter order, as a training script hands ``model.parameters()``
    to its optimizer; any the model does not hold come last, as they were. The order matters:
    a one-tensor-at-a-time step holds one parameter's temporaries while it makes the next one's,
    so its peak depends on which tensors come side by side (the tracer and the executor agree)."""
    pos = {id(p): i for i, p in enumerate(unique_params(model))}
    return sorted(params, key=lambda p: pos.get(id(origin_of(p)), len(pos)))


def opt_params(model: torch.nn.Module, split: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters of ``split`` (a program cut from ``model``) as the traced step's optimizer
    gets them: in the model's order (:func:`in_model_order`)."""
    return in_model_order(model, unique_params(split))


def grad_meta(t: torch.Tensor) -> tuple:
    """What an optimizer step can see of a gradient under fake tensors (no values)."""
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, t.device, t.layout)


def dense_grad(p: torch.Tensor) -> torch.Tensor:
    """An uninitialised gradient of the layout autograd gives the dense parameter ``p``."""
    return torch.empty_strided(p.shape, p.stride(), dtype=p.dtype, device=p.device)


def casts(dtype: str) -> bool:
    """Whether training at ``dtype`` runs under autocast."""
    return dtype != "fp32"


def autocast(dtype: str, device_type: str = "cpu"):
    """The training precision's autocast on ``device_type`` (the forward runs under it: the
    export does not bake its casts in)."""
    if not casts(dtype):
        return contextlib.nullcontext()
    if dtype == "bf16":
        if device_type == "cpu" and _TARGET == "cuda":
            stack = contextlib.ExitStack()
            stack.enter_context(torch.autocast("cpu", dtype=torch.bfloat16))
            stack.enter_context(CudaAutocast())
            return stack
        return torch.autocast(device_type, dtype=torch.bfloat16)
    raise CaptureError(f"unknown training precision {dtype!r}; valid: {list(TRAIN_DTYPES)}")
