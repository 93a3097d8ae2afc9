"""The temporaries of an optimizer that steps one tensor at a time, per byte of the tensors it steps.

torch's optimizers step one parameter at a time on the CPU by default (``foreach`` is CUDA's default):
each parameter's step makes temporaries of its size (AdamW: the square root of its second moment and
that divided by the bias correction, twice its bytes), and some outlive the step of that parameter into
the next one's (AdamW's ``denom``, a local variable of the loop, until the next parameter's is made). A
traced step of a whole model shows only the most of these, at its largest parameter and the one before
it (the tiny LSTM: 3 × its 16 KiB weight); a pipeline stage holding only the embedding steps it with
2 × its bytes, not 3 ×.

:func:`single_step_rates` measures the two rates on small stand-in parameters with the model's own
optimizer class and settings: ``solo``, the temporaries of one parameter's step per byte of it,
``carry``, what the step of the parameter just before still holds per byte of it (two parameters), and
``deep``, what all earlier ones hold (three parameters of one size: ``carry`` again where nothing
outlives the next step). :func:`simulator.optstep.step_temps` turns them into a set's temporaries.
"""
from __future__ import annotations

import inspect

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..memory import LiveBytes

__all__ = ["single_step_rates", "step_temps_measured"]

_N = 4096  # elements of each stand-in parameter (fp32: 16 KiB)
_rates: dict = {}


def step_temps_measured(optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter]) -> int:
    """Bytes above ``params``, their gradients and ``optimizer``'s state at the most while it steps them
    (the second of two steps: the first makes the state; fresh gradients of ones before each)."""
    peak = 0
    for _ in range(2):
        for p in params:
            p.grad = torch.full_like(p, 0.25)
        live = LiveBytes()
        live.track(params)
        live.track(p.grad for p in params)
        live.track(t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor))
        live.reset_peak()
        base = live.live
        with live:
            optimizer.step()
        peak = live.peak - base
    return peak


def _step_temps(cls, defaults: dict, k: int) -> int:
    """:func:`step_temps_measured` for ``cls(**defaults)`` stepping ``k`` parameters of ``_N`` elements."""
    ps = [torch.nn.Parameter(torch.full((_N,), 0.5)) for _ in range(k)]
    return step_temps_measured(cls(ps, **defaults), ps)


def single_step_rates(optimizer: torch.optim.Optimizer) -> list[float] | None:
    """``[solo, carry, deep]`` for ``optimizer``'s class and settings stepping one tensor at a time (module
    docstring), or None where a copy of it cannot be made and stepped on stand-ins (an optimizer whose
    constructor takes more than its ``defaults``)."""
    cls = type(optimizer)
    defaults = dict(getattr(optimizer, "defaults", {}) or {})
    try:  # (a setting the class keeps but its constructor does not take: AdamW's decoupled_weight_decay)
        sig = inspect.signature(cls.__init__).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in sig.values()):
            defaults = {k: v for k, v in defaults.items() if k in sig}
    except (TypeError, ValueError):
        pass
    try:
        key = (cls, repr(sorted(defaults.items())))
    except Exception:  # noqa: BLE001 - an unprintable setting: measured each time
        key = None
    if key is not None and key in _rates:
        return _rates[key]
    try:
        with unset_fake_temporarily(), torch.device("cpu"):
            one, two, three = (_step_temps(cls, defaults, k) for k in (1, 2, 3))
    except Exception:  # noqa: BLE001 - any optimizer the user wrote; the simulator falls back to the trace's
        return None
    nb = _N * 4
    solo = one / nb
    out = [solo, max(0.0, two / nb - solo), max(0.0, three / nb - solo)]
    if key is not None:
        _rates[key] = out
    return out
