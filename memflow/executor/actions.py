"""Per-node memory actions: ``keep``, ``recompute`` and ``swap``.

``recompute`` wraps a node's call in ``torch.utils.checkpoint.checkpoint``
(non-reentrant): only the node's inputs stay alive after its forward, and the
forward is replayed right before the node's backward.

``swap`` runs the node's forward under ``saved_tensors_hooks``: every
tensor autograd saves (except parameters) is copied to host memory when it
is saved and copied back when the backward needs it. On the CPU the host
copy is made inside :meth:`LiveBytes.host`, so it no longer counts as device
memory and the device storage dies when nothing else holds it; the copy back
is an accounted device allocation. On CUDA the copy goes to a pinned buffer
on a side stream and comes back on a side stream (guarded; untested without
a GPU).
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch
from torch.utils.checkpoint import checkpoint

from ..memory import LiveBytes
from ..strategy import KEEP, RECOMPUTE, SWAP

__all__ = ["make_wrap", "HostSwap"]

MIN_SWAP_BYTES = 256  # smaller saved tensors stay on the device


class HostSwap:
    """Saved-tensor hooks that move saved activations to host memory and back.

    Packed tensors are recorded per (micro-batch, node) so that
    :meth:`prefetch` can start the copies back for the node whose backward
    runs next (CUDA: on a side stream, overlapping the current node's
    backward; CPU: the copy back happens on demand in ``unpack``).
    """

    def __init__(self, live: LiveBytes | None, param_ptrs: set[int]):
        self.live = live
        self.param_ptrs = param_ptrs
        self.cuda = torch.cuda.is_available()
        self._stream = torch.cuda.Stream() if self.cuda else None
        self.key: tuple[int, int] = (0, 0)  # (micro-batch, node) being packed
        self.records: dict[tuple[int, int], list[list]] = {}

    def _host_ctx(self):
        return self.live.host() if self.live is not None else contextlib.nullcontext()

    def pack(self, t: torch.Tensor):
        try:
            ptr = t.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):
            return t
        if ptr in self.param_ptrs or t.numel() * t.element_size() < MIN_SWAP_BYTES:
            return t
        if t.is_cuda:  # pragma: no cover - needs a GPU
            host = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=True)
            self._stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self._stream):
                host.copy_(t, non_blocking=True)
            t.record_stream(self._stream)
            ev = torch.cuda.Event()
            ev.record(self._stream)
            rec = ["cuda", t.device, host, ev, None]
        else:
            with self._host_ctx():
                host = t.clone()
            rec = ["cpu", t.device, host, None, None]
        self.records.setdefault(self.key, []).append(rec)
        return rec

    def prefetch(self, mb: int, k: int) -> None:
        """Start copying node k's swapped tensors (micro-batch mb) back to the device."""
        recs = self.records.pop((mb, k), None)
        if not recs or not self.cuda:
            return
        for rec in recs:  # pragma: no cover - needs a GPU
            if rec[0] != "cuda" or rec[4] is not None:
                continue
            self._stream.wait_event(rec[3])
            with torch.cuda.stream(self._stream):
                dev = rec[2].to(rec[1], non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self._stream)
            rec[4] = (dev, ev)

    def drop(self, mb: int) -> None:
        for key in [key for key in self.records if key[0] == mb]:
            del self.records[key]

    def unpack(self, packed):
        if isinstance(packed, torch.Tensor):
            return packed
        kind, device, host, ev, fetched = packed
        if kind == "cuda":  # pragma: no cover - needs a GPU
            if fetched is None:
                self.prefetch_one(packed)
                fetched = packed[4]
            dev, done = fetched
            torch.cuda.current_stream().wait_event(done)
            dev.record_stream(torch.cuda.current_stream())
            return dev
        return host.clone()  # back into (accounted) device memory

    def prefetch_one(self, rec) -> None:  # pragma: no cover - needs a GPU
        self._stream.wait_event(rec[3])
        with torch.cuda.stream(self._stream):
            dev = rec[2].to(rec[1], non_blocking=True)
        ev = torch.cuda.Event()
        ev.record(self._stream)
        rec[4] = (dev, ev)

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


def _recompute(fn: Callable) -> Callable:
    """``checkpoint`` over the grad-requiring arguments; the rest (buffers that the
    node mutates in place, e.g. BatchNorm's running statistics, integer tensors)
    are closed over, so their in-place updates do not trip checkpoint's checks.
    The replay updates running statistics a second time, as recomputation
    does in any framework; the loss is unaffected."""

    def run(*args):
        pos = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
        fixed = list(args)

        def inner(*grad_args):
            full = list(fixed)
            for i, a in zip(pos, grad_args):
                full[i] = a
            return fn(*full)

        return checkpoint(inner, *[args[i] for i in pos], use_reentrant=False)

    return run


def make_wrap(actions: list[str], swapper: HostSwap) -> Callable[[int, Callable], Callable]:
    """The ``wrap(k, fn)`` hook for :meth:`StepProgram.forward_node`."""

    def wrap(k: int, fn: Callable) -> Callable:
        a = actions[k]
        if a == KEEP:
            return fn
        if a == RECOMPUTE:
            return _recompute(fn)
        if a == SWAP:
            def swapped(*args):
                swapper.key = (swapper.key[0], k)
                with swapper.hooks():
                    return fn(*args)
            return swapped
        raise ValueError(f"unknown memory action {a!r}")

    return wrap
