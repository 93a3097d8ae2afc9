"""The executor's CUDA swap on fake tensors: a swapped node's device allocations and frees, in order.

:class:`memflow.graph.actions.HostSwap` on a GPU copies each saved tensor to a pinned host buffer on a side
stream, holds the device tensor until that copy has finished (``reap``), and allocates each copy back on
the compute stream ``prefetch`` nodes ahead of its node's backward (a tensor whose copy out was never
reaped is read where it is: no second buffer). When a copy finishes depends on the link: the simulator
times the copies and frees a swapped node's saved buffers from the first phase after its copy-out ends
(:attr:`simulator.stage.StageEval.swap_leave`). :class:`FakeGpuSwap` makes the executor's calls on fake
tensors for :func:`memflow.reserved.step_events`, and lets each device tensor go at the start of the phase
the simulator frees it in, so the order of allocations and frees it gives the allocator model is the
simulator's timeline: a host copy made inside :meth:`LiveBytes.host` (no device bytes), the copy back an
empty device tensor of the host copy's shape, or nothing where the original is still held on the device
by another reader (the CUDA path reads it in place: :func:`memflow.graph.actions.device_original`). It
skips what ``HostSwap`` skips (parameters, the micro-batch's inputs, storages under ``MIN_SWAP_BYTES``),
keys storages by their ``StorageImpl`` (fake tensors have no addresses), keeps one record a tensor per
micro-batch (:func:`memflow.graph.actions.earlier_record`) and copies a storage whole once where a saved
tensor covers it or its saved views would add up to more, each view rebuilt from that copy
(:func:`memflow.graph.actions.storage_piece`), as the CUDA path does.
"""
from __future__ import annotations

from typing import Any

import torch

from .graph.actions import (SwapRecord, SwapView, earlier_record, note_piece, original_of, packed_before, register,
                            still_held, storage_piece, view_of)
from .kinds import MIN_SWAP_BYTES
from .memory import LiveBytes

__all__ = ["FakeGpuSwap"]


def _key(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


class FakeGpuSwap:
    """``HostSwap``'s interface (``key``, ``begin_node``, ``end_node``, ``reap``, ``prefetch``, ``drop``,
    ``hooks``, ``batch_inputs``) with its CUDA path's allocations on fake tensors. ``leave``: per swapped
    node, the first local phase (0 .. 2n-1: forwards, then backwards in reverse) its saved tensors are
    off the device, -1 for the phase after its forward; :meth:`at_phase` is called as each phase starts."""

    def __init__(self, live: LiveBytes, params: list[torch.Tensor], leave: dict[int, int]):
        self.live = live
        self.param_keys = {_key(p) for p in params}
        self.leave = {x: (x + 1 if f1 < 0 else f1) for x, f1 in leave.items()}
        self.key: tuple[int, int] = (0, 0)
        self.records: dict[tuple[int, int], list[list]] = {}
        self._copying: list[tuple[int, list]] = []  # (phase it leaves from, record)
        self._packed: dict[tuple, tuple] = {}
        self._mb_packed: dict[int, dict[tuple, tuple]] = {}  # (as HostSwap's: one record a tensor per micro-batch)
        self._mb_pieces: dict[int, dict[tuple, tuple]] = {}  # (as HostSwap's: a storage copied whole once)
        self._batch: set = set()

    def batch_inputs(self, tensors) -> None:
        self._batch = {_key(t) for t in tensors if isinstance(t, torch.Tensor)}

    def at_phase(self, p: int) -> None:
        """Local phase ``p`` starts: the device tensors whose copy out has ended by then go."""
        still = []
        for q, rec in self._copying:
            if q <= p:
                rec[1] = None
            else:
                still.append((q, rec))
        self._copying = still

    def begin_node(self, key: tuple[int, int]) -> None:
        self.key = key
        self._packed = {}

    def end_node(self) -> None:
        self._packed = {}

    def reap(self) -> None:  # (the phases say when: at_phase)
        pass

    def pack(self, t: torch.Tensor) -> Any:
        k = _key(t)
        if k is None or k in self.param_keys or k in self._batch or t.untyped_storage().nbytes() < MIN_SWAP_BYTES:
            return t.detach()  # (detached: as HostSwap's, no cycle through a saved output's grad_fn)
        ident, anchor, seen = packed_before(self._packed, t, k)
        if seen is not None:
            return seen
        rec = earlier_record(self, t, k, ident, anchor)
        if rec is not None:
            return rec
        pieces = self._mb_pieces.setdefault(self.key[0], {})
        whole_rec, whole = storage_piece(pieces, t, k)
        if whole_rec is not None:  # (its storage copied whole for an earlier saved tensor)
            return register(self, ident, anchor, SwapView(whole_rec, view_of(t)))
        # (whole: as the CUDA path's whole_storage, but holding t itself: a fake tensor set_ to a storage keeps
        # it alive for good, 43 KB of a bf16 Falcon's carried into every later step)
        n = t.untyped_storage().nbytes() // t.element_size() if whole else t.numel()
        with self.live.host():
            host = torch.empty((n,) if whole else t.shape, dtype=t.dtype)
        # (host copy, the device tensor until its copy ends, view, the copy back, how to find the original, the
        # original's storage where it is read in place)
        rec = SwapRecord([host, t, view_of(t) if whole else None, None, original_of(t, t, anchor), None])
        self._copying.append((self.leave.get(self.key[1], self.key[1] + 1), rec))
        note_piece(pieces, t, k, rec, whole)
        return register(self, ident, anchor, rec)

    def _fetch(self, rec: list) -> None:
        if rec[1] is not None:
            rec[3] = rec[1]
            return
        st = still_held(rec[4])
        if st is not None:
            # held elsewhere, unchanged: the CUDA path reads it where it is (device_original); a stand-in
            # made in host memory, no device allocation (a fake tensor set_ to a storage keeps it forever),
            # and the storage held by the record from now on, as the CUDA path's rebuilt tensor holds it: its
            # other reader may let it go first (a recomputed node's checkpoint, at the end of its backward,
            # before the swapped node's: 128 KiB under the simulator in both backwards)
            with self.live.host():
                rec[3] = torch.empty(rec[0].shape, dtype=rec[0].dtype)
            rec[5] = st
            return
        rec[3] = torch.empty(rec[0].shape, dtype=rec[0].dtype)

    def prefetch(self, mb: int, k: int) -> None:
        for rec in self.records.pop((mb, k), ()):
            if rec[3] is None:
                self._fetch(rec)

    def drop(self, mb: int) -> None:
        for key in [key for key in self.records if key[0] == mb]:
            del self.records[key]
        self._mb_packed.pop(mb, None)
        self._mb_pieces.pop(mb, None)
        for _, rec in self._copying:  # (the micro-batch's backward is over: nothing of it is read again)
            rec[1] = None
        self._copying = []

    def unpack(self, rec: Any) -> torch.Tensor:
        if isinstance(rec, torch.Tensor):
            return rec
        if isinstance(rec, SwapView):
            return self.unpack(rec.rec).as_strided(*rec.view)
        if rec[3] is None:
            self._fetch(rec)
        dev, view = rec[3], rec[2]
        return dev if view is None else dev.as_strided(*view)

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)
