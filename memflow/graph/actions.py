"""Per-node memory actions: ``keep``, ``recompute``, ``swap`` and ``selective``.

``recompute`` wraps a node's call in ``torch.utils.checkpoint.checkpoint``
(non-reentrant): only the node's inputs stay alive after its forward, and the
forward is replayed right before the node's backward.

``selective`` is ``recompute`` with torch's selective-checkpointing context
(:mod:`memflow.graph.selective`): the expensive ops' outputs are held, the
rest is replayed before the node's backward.

``swap`` runs the node's forward under ``saved_tensors_hooks``: every
tensor autograd saves (except parameters, the step's batch inputs and tensors whose
storage is under ``MIN_SWAP_BYTES``, which stay on the device) is copied
to host memory when it is saved and copied back when the backward needs it; the
node's saved inputs too (the program lets an input die with its last use, so a
swapped copy frees it once its other readers are done). The batch's own tensors
stay on the device as they do for every other action: the profiler traces a
swapped node with the batch held (its caller holds it), and the simulator counts
the batch alike; a patchify convolution that saves an image batch made the
executor's first stage use less than predicted (HF ConvNeXt, 4 micro-batches:
−37%) before. A tensor saved twice is
copied once, a broadcast view as its storage. On the CPU the host copy is made inside :meth:`LiveBytes.host`, so it
no longer counts as device memory and the device storage dies when nothing
else holds it; the copy back is an accounted device allocation. On CUDA the
copy goes to a pinned buffer on a side stream; the device tensor is held
until that copy has finished (as the GPU must: its memory cannot be reused
before), and the copy back is started one node ahead on the side stream, into
a buffer allocated on the compute stream (:meth:`HostSwap.prefetch_one`). A storage is copied whole once
where a saved tensor covers it or the views of it saved so far would add up to more, every saved view of it
rebuilt from that one copy (:func:`storage_piece`); where the original is still
on the device then, held by another reader (a recomputed node's checkpoint holding its input), it is read
in place instead (:func:`device_original`), as the simulator counts it.
"""
from __future__ import annotations

import contextlib
import weakref
from typing import Callable

import torch
from torch.utils.checkpoint import checkpoint

from ..memory import LiveBytes
from ..kinds import KEEP, MIN_SWAP_BYTES, RECOMPUTE, SELECTIVE, SWAP
from .selective import selective_context

__all__ = ["make_wrap", "HostSwap", "SwapRecord", "SwapView", "earlier_record", "copy_source", "packed_before",
           "original_of", "device_original", "still_held", "storage_piece", "note_piece", "whole_storage", "view_of",
           "register"]


class SwapRecord(list):
    """A swapped tensor's record (a list, as the hooks read it) that can be weakly referenced."""

    __slots__ = ("__weakref__",)


class SwapView:
    """A saved tensor a GPU swap rebuilds from another tensor's record, one of its storage copied whole
    (:func:`storage_piece`): the record and the tensor's (shape, stride, storage offset) in that storage."""

    __slots__ = ("rec", "view", "__weakref__")

    def __init__(self, rec: list, view: tuple):
        self.rec = rec
        self.view = view


class HostSwap:
    """Saved-tensor hooks that move saved activations to host memory and back.

    Packed tensors are recorded per (micro-batch, node) so that
    :meth:`prefetch` can start the copies back for the node whose backward
    runs next (CUDA: on a side stream, overlapping the current node's
    backward; CPU: the copy back happens on demand in ``unpack``).
    """

    def __init__(self, live: LiveBytes | None, param_ptrs: set[int], device: torch.device | None = None):
        self.live = live
        self.param_ptrs = param_ptrs
        self.cuda = device is not None and device.type == "cuda"
        self._stream = torch.cuda.Stream(device) if self.cuda else None
        self.key: tuple[int, int] = (0, 0)  # (micro-batch, node) being packed
        self._packed: dict[tuple, tuple] = {}  # this node's (weakref, record) by tensor identity
        # CUDA: per micro-batch, its nodes' records by tensor identity: a tensor a later node saves again (an
        # LSTM layer's output, saved by it and by the next layer) is copied out once and back once
        self._mb_packed: dict[int, dict[tuple, tuple]] = {}
        # CUDA: per micro-batch, its storages copied whole or in part (storage_piece): one copied whole once
        self._mb_pieces: dict[int, dict[tuple, tuple]] = {}
        # the CPU: this node's host copies of whole storages, (weakref to a tensor on it, copy) by (address, version)
        self._whole: dict[tuple, tuple] = {}
        self.records: dict[tuple[int, int], list[list]] = {}
        self._copying: list[list] = []  # CUDA records whose copy-out may still be running
        self._batch: list[tuple[weakref.ref, int]] = []  # the micro-batch's inputs (never swapped)

    def batch_inputs(self, tensors) -> None:
        """The batch tensors of the micro-batch whose forward runs next: kept on the device (a saved
        view of one too, while the tensor lives: a dead one's address may hold an activation)."""
        self._batch = [(weakref.ref(t), t.untyped_storage().data_ptr()) for t in tensors
                       if isinstance(t, torch.Tensor) and t.device.type != "meta"]

    def _in_batch(self, ptr: int) -> bool:
        return any(p == ptr and r() is not None for r, p in self._batch)

    def begin_node(self, key: tuple[int, int]) -> None:
        """Node ``key`` = (micro-batch, node) is about to run its forward."""
        self.key = key
        self._packed = {}
        self._whole = {}
        self.reap()

    def end_node(self) -> None:
        """The node's forward is over: its dedupe tables let go of its host copies (autograd's saved
        records hold them on), or the last swapped node's would outlive the step's backward into the next
        step's data loading (a tiny model's host 32 bytes above its plan)."""
        self._packed = {}
        self._whole = {}

    def reap(self) -> None:
        """Release the device tensors whose copy to the host has finished (CUDA).

        While copies are pending the host first waits for the compute stream, so it
        never runs more than a node ahead of the GPU: otherwise the kernels it has
        launched hold memory (and prefetches allocate) long before the GPU reaches
        them, while the swapped-out tensors wait for copies the GPU has not started,
        and a plan that fits in the GPU's own order would not fit."""
        if self._copying:  # pragma: no cover - needs a GPU
            torch.cuda.current_stream(self._stream.device).synchronize()
            still = []
            for rec in self._copying:
                if rec[3].query():
                    rec[5] = None
                else:
                    still.append(rec)
            self._copying = still

    def _host_ctx(self):
        return self.live.host() if self.live is not None else contextlib.nullcontext()

    def pack(self, t: torch.Tensor):
        try:
            st = t.untyped_storage()
            ptr = st.data_ptr()
        except (RuntimeError, NotImplementedError):
            return t.detach()
        # (the storage's bytes, as the simulator's layout counts a buffer: a small view of a large storage
        # is moved, so the storage can leave the device; a broadcast of a small one stays). Kept, it is kept
        # detached: autograd hands the hook a saved output with its own grad_fn, which holding as is would
        # make a cycle that outlives the step where no backward runs through it (a dead branch: RWKV's
        # final recurrent state, kept to the next garbage collection)
        if ptr in self.param_ptrs or st.nbytes() < MIN_SWAP_BYTES or self._in_batch(ptr):
            return t.detach()
        ident, anchor, seen = packed_before(self._packed, t, ptr)
        if seen is not None:
            return seen
        if t.is_cuda:  # pragma: no cover - needs a GPU
            rec = earlier_record(self, t, ptr, ident, anchor)
            if rec is not None:
                return rec
            pieces = self._mb_pieces.setdefault(self.key[0], {})
            whole_rec, whole = storage_piece(pieces, t, ptr)
            if whole_rec is not None:  # (its storage copied whole for an earlier saved tensor)
                return register(self, ident, anchor, SwapView(whole_rec, view_of(t)))
            src, view = whole_storage(t) if whole else (t, None)  # (not whole: t is no broadcast)
            with self._host_ctx():
                host = torch.empty(src.shape, dtype=t.dtype, device="cpu", pin_memory=True)
            self._stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self._stream):
                host.copy_(src, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self._stream)
            # src held until the copy is done (reap); then, where something else still holds it, found again
            rec = SwapRecord(["cuda", t.device, host, ev, None, src, view, original_of(t, src, anchor)])
            self._copying.append(rec)
            note_piece(pieces, t, ptr, rec, whole)
            return register(self, ident, anchor, rec)
        else:
            # one host copy per storage that a saved tensor covers whole, each of the node's saved tensors on
            # it rebuilt from that copy: the plan counts a node's storage once, and GPT-2's attention saves
            # its output both as SDPA's [b, h, s, d] and as the projection's [b·s, h·d] (two copies put the
            # host 3% above the prediction)
            src, view = copy_source(t)
            whole = self._whole.get((ptr, t._version))
            if whole is not None and whole[0]() is not None:
                rec = ["cpu", t.device, whole[1], None, None, None, view_of(t)]
            else:
                if view is None and t.numel() * t.element_size() >= st.nbytes():
                    src, view = whole_storage(t)[0], view_of(t)
                with self._host_ctx():
                    host = src.clone()
                rec = ["cpu", t.device, host, None, None, None, view]
                if view is not None:
                    self._whole[(ptr, t._version)] = (anchor, host)
        self._packed[ident] = (anchor, rec)
        self.records.setdefault(self.key, []).append(rec)
        return rec

    def prefetch(self, mb: int, k: int) -> None:
        """Start copying node k's swapped tensors (micro-batch mb) back to the device."""
        self.reap()
        recs = self.records.pop((mb, k), None)
        if not recs or not self.cuda:
            return
        torch.cuda.current_stream(self._stream.device).synchronize()  # pragma: no cover - see reap
        for rec in recs:  # pragma: no cover - needs a GPU
            if rec[0] == "cuda" and rec[4] is None:
                self.prefetch_one(rec)

    def drop(self, mb: int) -> None:
        for key in [key for key in self.records if key[0] == mb]:
            del self.records[key]
        self._mb_packed.pop(mb, None)
        self._mb_pieces.pop(mb, None)

    def unpack(self, packed):
        if isinstance(packed, torch.Tensor):
            return packed
        if isinstance(packed, SwapView):  # pragma: no cover - needs a GPU
            return self.unpack(packed.rec).as_strided(*packed.view)
        kind, device, host, ev, fetched, _, view = packed[:7]
        if kind == "cuda":  # pragma: no cover - needs a GPU
            if fetched is None:
                self.prefetch_one(packed)
                fetched = packed[4]
            dev, done = fetched
            if done is not None:  # (None: the device tensor itself, never copied out and back)
                torch.cuda.current_stream().wait_event(done)
                dev.record_stream(torch.cuda.current_stream())
        else:
            dev = host.clone()  # back into (accounted) device memory
        return dev if view is None else dev.as_strided(*view)

    def prefetch_one(self, rec) -> None:  # pragma: no cover - needs a GPU
        if rec[5] is not None:
            # its copy to the host has not been reaped: the device tensor is still held, so the backward
            # reads it as it is (no second buffer beside it, no copy back). The last nodes of a forward
            # meet this: the copies out queue behind each other on the side stream, and the H200 run of
            # swap-all GPT-2 held the loss node's 1.5 GiB logits twice (+11.5% over the prediction)
            rec[4] = (rec[5], None)
            return
        orig = device_original(rec[7])
        if orig is not None:
            # reaped, but still on the device, unchanged: held by another reader (a recomputed node's
            # checkpoint holds its input, which the swapped node before it saved). Read where it is, as
            # the simulator counts it; a copy back beside it put ResNet-50's fake run 3.8% over
            rec[4] = (orig, None)
            return
        # the device buffer is allocated on the compute stream, where it is read and freed: the caching
        # allocator keeps a pool per stream, and a buffer made on the side stream would come from (and
        # go back to) a second pool that the compute stream's frees never feed (its peak added to the
        # compute stream's in reserved memory: +20% over allocated for swap-all GPT-2 on the H200)
        main = torch.cuda.current_stream(rec[1])
        dev = torch.empty(rec[2].shape, dtype=rec[2].dtype, device=rec[1])
        self._stream.wait_stream(main)  # (the buffer's memory may still be in use by queued kernels)
        self._stream.wait_event(rec[3])
        with torch.cuda.stream(self._stream):
            dev.copy_(rec[2], non_blocking=True)
        dev.record_stream(self._stream)  # a buffer dropped before it is read is not reused mid-copy
        ev = torch.cuda.Event()
        ev.record(self._stream)
        rec[4] = (dev, ev)

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


def earlier_record(swap, t: torch.Tensor, storage_key, ident: tuple, anchor: weakref.ref):
    """The record an earlier node of this micro-batch made for ``t`` on a GPU (``swap``: a swap with the
    per-micro-batch table ``_mb_packed`` of weak references, this node's ``_packed``, ``records`` and
    ``key``), now this node's too; None where none is alive (the table for this micro-batch made)."""
    earlier = swap._mb_packed.setdefault(swap.key[0], {})
    _, _, ref = packed_before(earlier, t, storage_key)
    rec = ref() if ref is not None else None
    if rec is not None:  # (one copy out, one copy back, whichever node's prefetch comes first)
        swap._packed[ident] = (anchor, rec)
        swap.records.setdefault(swap.key, []).append(rec.rec if isinstance(rec, SwapView) else rec)
    return rec


def register(swap, ident: tuple, anchor: weakref.ref, out):
    """``out`` (a GPU swap's new record, or a :class:`SwapView` of an earlier one) as what ``swap``'s
    node saved for the tensor ``ident``, and as the micro-batch's (weakly: it dies with its last saver's
    backward; a later node saving the tensor again finds it, :func:`earlier_record`); its record is
    prefetched with the node's."""
    swap._packed[ident] = (anchor, out)
    swap._mb_packed[swap.key[0]][ident] = (anchor, weakref.ref(out))
    swap.records.setdefault(swap.key, []).append(out.rec if isinstance(out, SwapView) else out)
    return out


def storage_piece(pieces: dict, t: torch.Tensor, storage_key) -> tuple[list | None, bool]:
    """How a GPU swap moves ``t``, saved by a node of this micro-batch and not saved before as itself:
    ``(record, False)``: rebuilt from ``record``, its storage copied whole for an earlier saved tensor and
    unchanged since; ``(None, True)``: its storage is to be copied whole (``t`` covers it, or the parts of
    it copied so far and ``t`` add up to more than it); ``(None, False)``: ``t`` copied on its own.
    ``pieces``: the micro-batch's table, kept by :func:`note_piece`. A storage is copied at most once whole
    and its views no more than it, as the simulator counts a buffer: HF's Mamba saves a layer's scan
    states whole and then each step's slice of them, slices that came back one by one beside the whole
    (the fake run of every other node swapped 5-7% above the simulator)."""
    st = t.untyped_storage()
    e = _piece(pieces, t, storage_key)
    if e is not None and e[1] is not None:
        rec = e[1]()
        if rec is not None:
            return rec, False
    nb = t.numel() * t.element_size()
    return None, nb >= st.nbytes() or (e[2] if e is not None else 0) + nb > st.nbytes()


def note_piece(pieces: dict, t: torch.Tensor, storage_key, rec: list, whole: bool) -> None:
    """Record in ``pieces`` that ``t`` was copied: its storage whole into ``rec`` (``whole``), or itself."""
    e = _piece(pieces, t, storage_key)
    copied = (e[2] if e is not None else 0) + t.numel() * t.element_size()
    pieces[(storage_key, t.dtype, t._version)] = (weakref.ref(t.untyped_storage()),
                                                  weakref.ref(rec) if whole else None, copied)


def _piece(pieces: dict, t: torch.Tensor, storage_key) -> tuple | None:
    e = pieces.get((storage_key, t.dtype, t._version))
    return e if e is not None and e[0]() is t.untyped_storage() else None  # (not a dead storage's key)


def whole_storage(t: torch.Tensor) -> tuple[torch.Tensor, tuple | None]:
    """``t``'s storage as one tensor of its dtype covering it from its start, with the (shape, stride,
    offset) that rebuild ``t`` from it: ``t`` itself and None where ``t`` covers it contiguously, else a
    flat view of the whole storage."""
    st = t.untyped_storage()
    n = st.nbytes() // t.element_size()
    if t.is_contiguous() and t.storage_offset() == 0 and t.numel() == n:
        return t, None
    return t.new_empty(0).set_(st, 0, (n,), (1,)), view_of(t)


def view_of(t: torch.Tensor) -> tuple:
    """``t``'s (shape, stride, storage offset): ``as_strided``'s arguments that rebuild it on its storage."""
    return tuple(t.shape), t.stride(), t.storage_offset()


def packed_before(packed: dict, t: torch.Tensor, storage_key) -> tuple[tuple, weakref.ref, object]:
    """``(ident, anchor, record)``: the identity a swap dedupes a saved tensor by, a weak reference to what
    keeps it alive, and the record ``packed`` holds for it (None: not packed yet). The same tensor at the
    same version (an in-place op in between makes it another tensor), still alive: a dead tensor's memory
    may hold a new one with the same address and shape. Alive while its base is: each linear of a block
    takes its own view of one input (Llama's q, k and v projections), a view that dies once saved while the
    tensor it views lives on."""
    ident = (storage_key, t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, t._version)
    anchor = weakref.ref(t._base if t._base is not None else t)
    seen = packed.get(ident)
    return ident, anchor, (seen[1] if seen is not None and seen[0]() is not None else None)


def original_of(t: torch.Tensor, src: torch.Tensor, anchor: weakref.ref) -> tuple:
    """What lets a swap find a saved tensor's device original again (:func:`device_original`): a weak
    reference to its storage (autograd hands the pack hook of a node's own saved output an alias that
    dies at once: the storage is what lives on), the one to the tensor that keeps it alive
    (:func:`packed_before`) with its version now, and where ``src`` (what is copied,
    :func:`copy_source`) lies in the storage."""
    return (weakref.ref(src.untyped_storage()), anchor, t._version,
            (src.dtype, src.device, src.storage_offset(), tuple(src.shape), src.stride()))


def device_original(keep: tuple) -> torch.Tensor | None:
    """The device tensor a swapped record was copied from, where something else still holds its storage
    (:func:`original_of`'s ``keep``): a recomputed node's checkpoint holding its input, which the swapped
    node before it saved; None where it died, or where the tensor it was saved as lives on written in place
    since (its host copy is then what the backward must read; plain autograd refuses a saved tensor
    written in place, so a model that trains does not do it). Rebuilt over the same storage: no copy back,
    no second buffer beside it."""
    st = still_held(keep)
    if st is None:
        return None
    dtype, device, off, shape, stride = keep[3]
    return torch.empty(0, dtype=dtype, device=device).set_(st, off, shape, stride)


def still_held(keep: tuple):
    """The storage of :func:`device_original`'s tensor where it can be read in place, else None."""
    storage, anchor, version, _ = keep
    st = storage()
    a = anchor()
    if st is None or not st.nbytes() or (a is not None and a._version != version):
        return None
    return st


def copy_source(t: torch.Tensor) -> tuple[torch.Tensor, tuple | None]:
    """What a swap copies for ``t``: ``t`` itself, or, for a view that overlaps itself (a
    broadcast made by ``expand`` has stride 0 and may be far larger than its memory), its
    whole storage once, with the (shape, stride, offset) that rebuild the view after."""
    st = t.untyped_storage()
    if st.nbytes() >= t.numel() * t.element_size():
        return t, None
    return whole_storage(t)  # (a broadcast: never its storage contiguously)


def _recompute(fn: Callable, context_fn: Callable | None = None, preserve_rng_state: bool = True) -> Callable:
    """``checkpoint`` over the grad-requiring activations; the rest (parameters, buffers that the
    node mutates in place, e.g. BatchNorm's running statistics, integer tensors)
    are closed over, so their in-place updates do not trip checkpoint's checks.
    The replay updates running statistics a second time, as recomputation
    does in any framework; the loss is unaffected. ``context_fn``: checkpoint's (a selective
    policy's contexts, :data:`memflow.graph.selective.selective_context`)."""
    extra = {} if context_fn is None else {"context_fn": context_fn}

    def run(*args):
        # (parameters, leaves, are closed over too: the non-reentrant checkpoint still carries their
        # gradients, and a node that changes one in place in its forward, an Embedding with max_norm
        # renormalising its rows, does not trip the version check of a saved argument)
        pos = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad and not a.is_leaf]
        fixed = list(args)
        # checkpoint restores the random state of the devices its arguments are on: an empty tensor on the
        # node's accelerator where no activation argument is (a first node reading only token ids and
        # parameters, its dropout replayed with the mask it drew)
        dev = next((a.device for a in args if isinstance(a, torch.Tensor) and a.device.type not in ("cpu", "meta")),
                   None)
        carry = [torch.empty(0, device=dev)] if dev is not None and all(args[i].device != dev for i in pos) else []

        def inner(*grad_args):
            full = list(fixed)
            for i, a in zip(pos, grad_args[len(carry):]):
                full[i] = a
            return fn(*full)

        return checkpoint(inner, *carry, *[args[i] for i in pos], use_reentrant=False,
                          preserve_rng_state=preserve_rng_state, **extra)

    return run


def _uncached(fn: Callable) -> Callable:
    """``fn`` run with autocast's cast cache off (where autocast is on). Selective checkpointing counts
    each op's calls in the forward and again in the replay; a parameter another node cast first (a
    module reused in depth, a tied weight) is a cache hit in the forward but a cast in the replay (the
    cache died with the forward op), and SAC refuses the replay ("invocation index 1 ... not found")."""
    def run(*args):
        for dev in ("cuda", "cpu"):
            if torch.is_autocast_enabled(dev):
                with torch.autocast(dev, dtype=torch.get_autocast_dtype(dev), cache_enabled=False):
                    return fn(*args)
        return fn(*args)

    return run


def make_wrap(actions: list[str], swapper: HostSwap | None, preserve_rng_state: bool = True
              ) -> Callable[[int, Callable], Callable]:
    """The ``wrap(k, fn)`` hook for :meth:`StepProgram.forward_node` (``swapper``: None when no
    node swaps). ``preserve_rng_state=False``: a checkpoint's replay does not restore the random
    state (a profiler's trace, whose values do not matter, may run where it cannot be read)."""

    def wrap(k: int, fn: Callable) -> Callable:
        a = actions[k]
        if a == KEEP:
            return fn
        if a == RECOMPUTE:
            return _recompute(fn, preserve_rng_state=preserve_rng_state)
        if a == SELECTIVE:
            return _recompute(_uncached(fn), selective_context, preserve_rng_state)
        if a == SWAP:
            def swapped(*args):
                swapper.begin_node((swapper.key[0], k))
                try:
                    with swapper.hooks():
                        return fn(*args)
                finally:
                    swapper.end_node()
            return swapped
        raise ValueError(f"unknown memory action {a!r}")

    return wrap
