"""The temporaries of an optimizer step that runs one tensor at a time (torch's default on the CPU).

Each tensor's step makes temporaries of its size (``solo`` per byte of it) and some outlive it into
the next tensors' steps (``carry`` per byte of the tensor just before; ``deep`` per byte of every
earlier one, at most ``carry`` where nothing outlives the next step), all measured by the profiler
on stand-ins with the model's optimizer (:mod:`memflow.profile.optstep`). Tensors stepped in a known
order make at most ``max_i solo · s_i + carry · s_(i-1)`` above their state where ``deep`` equals
``carry`` (AdamW: its ``denom`` outlives its tensor's step into the next one's only); in any order,
at most the larger of ``solo · s1 + deep · s2`` and ``solo · s2 + deep · s1``, ``s1 ≥ s2`` the two
largest (one tensor: ``solo · s1``).
"""
from __future__ import annotations

from typing import Sequence

__all__ = ["step_temps"]


def step_temps(sizes: Sequence[int], rates: Sequence[float], ordered: bool = False) -> int:
    """The most temporaries bytes a one-tensor-at-a-time step of tensors of ``sizes`` bytes makes, with
    ``rates`` = ``(solo, carry[, deep])`` (module docstring); ``ordered``: ``sizes`` in the step's order."""
    solo, carry = float(rates[0]), float(rates[1])
    deep = float(rates[2]) if len(rates) > 2 else carry
    if ordered and deep <= carry:
        prev, out = 0, 0.0
        for s in sizes:
            v = solo * s + carry * prev
            if v > out:
                out = v
            prev = s
        return int(out)
    s1 = s2 = 0
    for s in sizes:
        if s > s1:
            s1, s2 = s, s1
        elif s > s2:
            s2 = s
    return int(max(solo * s1 + deep * s2, solo * s2 + deep * s1 if s2 else 0.0))
