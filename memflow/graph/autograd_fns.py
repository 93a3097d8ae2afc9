"""A model's own ``torch.autograd.Function``\\ s kept whole through the export, their backward included.

``torch.export`` traces through ``Function.apply``: the graph holds the forward's ops and autograd later
differentiates those, so the Function's own ``backward`` is lost. A straight-through estimator (a sign in
the forward, the identity in the backward) then trains with the sign's zero gradient: the planned step
is not the model's (an outside binarised MLP's losses were 50% off plain training's, silently).

While a step is exported (:func:`kept_functions`), ``apply`` of a Function defined outside torch runs
as one custom op, ``memflow::fn_apply(key, tensors)``, whose forward is the Function's forward and whose
autograd formula is the Function's backward (``torch.library.custom_op`` with ``register_autograd``):
the export keeps that op as one node, and the node program's backward calls the user's ``backward``.
``key`` names a call site's record in this process (:data:`_CALLS`: the class, the non-tensor
arguments, which tensors the forward saved — an input, an output, or one it made, returned as an extra
output of the op — and the plain attributes the forward set on ``ctx``); every process that runs a
program captures it itself, so its keys are its own. A forward that marks an input dirty (in place),
returns a non-tensor or sets a tensor on ``ctx`` other than by ``save_for_backward`` is one clear capture
error. An output that is a view of an input (``x.view_as(x)``, a gradient-reversal layer) is a copy of
it inside the op, as a custom op's outputs may not alias its inputs.

torch's own reentrant checkpoint (``checkpoint(..., use_reentrant=True)``, ``checkpoint_sequential``) is a
Function whose forward runs the wrapped function under ``no_grad``: traced through, the region's ops
are recorded without grad and nothing in it trains (an outside model's planned step had no gradient at
all). While exporting, its ``apply`` calls the wrapped function directly: what is recomputed is the
plan's choice, as with the non-reentrant checkpoint, which the export traces through unchanged.
"""
from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.checkpoint import CheckpointFunction

__all__ = ["kept_functions", "FunctionNotKept"]

_INTERNAL = ("saved", "needs_input_grad", "materialize_grads", "non_differentiable")  # (not the user's attributes)


class FunctionNotKept(Exception):
    """A user Function this capture cannot keep whole (one line: what it does and what to change)."""


@dataclass
class _Call:
    cls: type
    template: list  # per positional argument: ("t", index into the tensors) or ("c", the constant)
    needs: tuple  # needs_input_grad, per positional argument
    n_out: int = -1
    single: bool = True
    saved: list = field(default_factory=list)  # ("in" | "out" | "extra", index)
    attrs: dict = field(default_factory=dict)


_CALLS: dict[int, _Call] = {}
_KEYS = itertools.count()


class _Ctx:
    """What a user's forward and backward see as ``ctx``."""

    def __init__(self, needs: tuple):
        self.saved: tuple = ()
        self.needs_input_grad = needs
        self.materialize_grads = True
        self.non_differentiable: tuple = ()

    def save_for_backward(self, *ts: Any) -> None:
        self.saved = ts

    def save_for_forward(self, *ts: Any) -> None:  # (forward-mode AD: not used by training)
        pass

    @property
    def saved_tensors(self) -> tuple:
        return self.saved

    def mark_dirty(self, *ts: Any) -> None:
        raise FunctionNotKept("its forward changes an input in place (ctx.mark_dirty)")

    def mark_non_differentiable(self, *ts: Any) -> None:
        self.non_differentiable = ts

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


def _aliases(t: torch.Tensor, others: list) -> bool:
    s = t.untyped_storage()
    return any(isinstance(o, torch.Tensor) and o.untyped_storage()._cdata == s._cdata for o in others)


def _run(key: int, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The Function's forward on ``tensors``: its outputs, then the tensors it saved that it made."""
    c = _CALLS[key]
    args = [tensors[v] if k == "t" else v for k, v in c.template]
    ctx = _Ctx(c.needs)
    if _overrides(c.cls, "setup_context"):
        out = c.cls.forward(*args)
        c.cls.setup_context(ctx, tuple(args), out)
    else:
        out = c.cls.forward(ctx, *args)
    single = not isinstance(out, tuple)
    outs = [out] if single else list(out)
    if not all(isinstance(o, torch.Tensor) for o in outs):
        raise FunctionNotKept("its forward returns something other than tensors")
    outs = [o.clone() if _aliases(o, tensors) else o for o in outs]
    saved, extra = [], []
    for s in ctx.saved:
        if s is None:
            saved.append(("none", 0))
        elif any(s is t for t in tensors):
            saved.append(("in", next(i for i, t in enumerate(tensors) if s is t)))
        elif any(s is o for o in outs):
            saved.append(("out", next(i for i, o in enumerate(outs) if s is o)))
        else:
            saved.append(("extra", len(extra)))
            extra.append(s.clone() if _aliases(s, tensors + outs) else s)
    attrs = {k: v for k, v in vars(ctx).items() if k not in _INTERNAL}
    if any(isinstance(v, torch.Tensor) for v in attrs.values()):
        raise FunctionNotKept("its forward keeps a tensor on ctx other than by ctx.save_for_backward")
    c.n_out, c.single, c.saved, c.attrs = len(outs), single, saved, attrs
    return outs + extra


@torch.library.custom_op("memflow::fn_apply", mutates_args=())
def fn_apply(key: int, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return _run(key, tensors)


@fn_apply.register_fake
def _fn_apply_fake(key: int, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return _run(key, tensors)


def _setup(ctx: Any, inputs: tuple, output: Any) -> None:
    key, tensors = inputs
    c = _CALLS[key]
    outs, extra = output[:c.n_out], output[c.n_out:]
    pick = {"in": tensors, "out": outs, "extra": extra}
    ctx.save_for_backward(*[None if k == "none" else pick[k][i] for k, i in c.saved])
    ctx.key = key


def _backward(ctx: Any, grads: list) -> tuple:
    c = _CALLS[ctx.key]
    u = _Ctx(c.needs)
    u.saved = ctx.saved_tensors
    for k, v in c.attrs.items():
        setattr(u, k, v)
    gs = list(grads[:c.n_out])
    res = c.cls.backward(u, *gs)
    res = list(res) if isinstance(res, tuple) else [res]
    n = sum(1 for k, _ in c.template if k == "t")
    out: list = [None] * n
    for pos, (k, v) in enumerate(c.template):
        if k == "t" and pos < len(res):
            out[v] = res[pos]
    return None, out


fn_apply.register_autograd(_backward, setup_context=_setup)


def _overrides(cls: type, name: str) -> bool:
    return getattr(cls, name, None) is not getattr(torch.autograd.Function, name, None)


def _user_function(cls: type) -> bool:
    mod = (getattr(cls, "__module__", "") or "").split(".")[0]
    return mod not in ("torch", "memflow")  # (a model file's module is memflow_user_model_*: the user's)


@contextlib.contextmanager
def kept_functions():
    """While exporting: ``apply`` of a Function defined outside torch (and memflow) runs as
    ``memflow::fn_apply`` where grad is enabled and a tensor argument requires it."""
    base = torch.autograd.Function
    orig = base.__dict__["apply"]

    def apply(cls: type, *args: Any, **kwargs: Any) -> Any:
        if cls is CheckpointFunction:  # the model's own reentrant checkpoint: its function, with grad
            return args[0](*args[2:])
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if (kwargs or not _user_function(cls) or not torch.is_grad_enabled()
                or not any(t.requires_grad for t in tensors)):
            return orig.__func__(cls, *args, **kwargs)
        template, ts = [], []
        for a in args:
            if isinstance(a, torch.Tensor):
                template.append(("t", len(ts)))
                ts.append(a)
            else:
                template.append(("c", a))
        key = next(_KEYS)
        _CALLS[key] = _Call(cls, template, tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args))
        try:
            outs = torch.ops.memflow.fn_apply(key, ts)
        except FunctionNotKept as e:
            raise FunctionNotKept(f"the autograd.Function `{cls.__qualname__}` cannot be kept through the export: "
                                  f"{e}; write it as a torch.library.custom_op with register_autograd") from None
        c = _CALLS[key]
        return outs[0] if c.single else tuple(outs[:c.n_out])

    base.apply = classmethod(apply)
    try:
        yield
    finally:
        base.apply = orig
