"""What a pipeline cut's sends copy, recorded while the step is traced.

A value that crosses a cut travels as a contiguous copy where it is a view of part of a storage
(:mod:`memflow.graph.sending`): a slice a stage's last node returns, the gradient of one piece of
a concatenation. The copy is memory beside the storage, held until the send completes, which no
traced phase holds. :class:`SendCopies` watches the traced step
(:meth:`memflow.graph.program.StepProgram.run_step`'s ``watch``; layouts only, no tensor kept) and
records, for the simulator's stage layout (:mod:`memflow.simulator.layout`):

* per storage of which a value a later node reads would be sent as a copy, every value on it a later
  node reads: ``[maker, last reader, bytes its send copies (0: none)]`` (:attr:`Buffer.copies`; a stage
  ``[a, b)`` sends it where ``a <= maker < b <= last reader``, a value it received it relays as received,
  contiguous). A value sent as a copy does not hold its storage: the copy is held instead;
* per value on a batch input's storage (no buffer of the trace's: the step's batch is apart) that would be
  sent as a copy, ``[maker, last reader, bytes]`` (:attr:`TaskGraph.fwd_input_send_copies`): a language
  model's targets, ``tokens[:, 1:]``, sliced by its first node and read by its loss on a later stage;
* per cut ``b`` whose gradients sent back would be copies: ``[b, bytes]`` (the gradients of the values
  crossing ``b`` as the nodes from ``b`` on leave them, before node ``b - 1``'s backward).
"""
from __future__ import annotations

from typing import Any

import torch

from ..graph.program import StepProgram
from ..graph.sending import send_copy_bytes
from ..memory import LiveBytes, storages

__all__ = ["SendCopies"]


class SendCopies:
    """A ``run_step`` watch that records what each cut's sends copy (see the module docstring), and
    passes every call on to ``inner`` (another watch, or None)."""

    def __init__(self, program: StepProgram, live: LiveBytes, inner: Any = None, inputs: set | None = None):
        self.program, self.live, self.inner = program, live, inner
        self.inputs = inputs or set()  # ids of the batch inputs' storages (LiveBytes.track_kept's keys)
        self.on_input: set[str] = set()  # values that are views of a batch input
        self.maker = {v: c.index for c in program.calls for v in program.outputs_of(c.index)}
        self.values: dict[str, list[int]] = {}  # value -> [maker, last reader, bytes its forward send copies]
        self.storage: dict[str, int] = {}  # value -> id of its storage's event (kept by ``live``: ids unique)
        self.cuts: dict[int, int] = {}  # cut -> bytes its gradients' sends copy
        self._active: set[str] | None = None
        self._by_last: dict[int, list[str]] = {}
        self._by_maker: dict[int, list[str]] = {}

    def forward(self, k: int, env: dict) -> None:
        for a in self.program.calls[k].arg_names:
            j = self.maker.get(a)
            if j is None or j >= k:
                continue
            rec = self.values.get(a)
            if rec is None:
                v = env[a]
                rg = isinstance(v, torch.Tensor) and v.requires_grad and v.is_floating_point()
                rec = self.values[a] = [j, k, send_copy_bytes(v, rg)]
                ev = self.live.event_of(v) if isinstance(v, torch.Tensor) else None
                if ev is not None:
                    self.storage[a] = id(ev)
                elif isinstance(v, torch.Tensor) and any(id(st) in self.inputs for st in storages(v)):
                    self.on_input.add(a)
            rec[1] = k
        if self.inner is not None:
            self.inner.forward(k, env)

    def backward(self, k: int, state: Any, grads: dict) -> None:
        if self._active is None:  # the forward is done: which values cross which cut
            self._active = set()
            for v, (j, r, _nb) in self.values.items():
                self._by_last.setdefault(r, []).append(v)
                self._by_maker.setdefault(j, []).append(v)
        # crossing cut b = k + 1: made at or before k, read after it
        self._active.update(self._by_last.get(k + 1, ()))
        self._active.difference_update(self._by_maker.get(k + 1, ()))
        nb = sum(send_copy_bytes(grads.get(v), True) for v in self._active)
        if nb:
            self.cuts[k + 1] = nb
        if self.inner is not None:
            self.inner.backward(k, state, grads)

    def by_storage(self) -> dict[int, list[list[int]]]:
        """Per storage event id with a value sent as a copy: every value on it a later node reads,
        ``[maker, last reader, copy bytes]``."""
        out: dict[int, list[list[int]]] = {}
        for v, rec in self.values.items():
            if v in self.storage:
                out.setdefault(self.storage[v], []).append(list(rec))
        return {k: recs for k, recs in out.items() if any(r[2] for r in recs)}

    def input_list(self) -> list[list[int]]:
        """``[maker, last reader, copy bytes]`` of each value on a batch input's storage sent as a copy."""
        return sorted(list(self.values[v]) for v in self.on_input if self.values[v][2])

    def bwd_list(self) -> list[list[int]]:
        return [[b, nb] for b, nb in sorted(self.cuts.items())]
