"""Live tensor-byte accounting: a ``TorchDispatchMode`` storage counter.

Device memory on the CPU is the bytes of live tensor storages: every storage
an op creates is counted once (views share it) and uncounted when the storage
dies (a weakref callback). The same counter measures a real step, traces a
fake-tensor step (FakeTensor storages report their sizes without allocating),
and enforces a plan's device memory cap in the executor.

Events can be recorded with the *phase* that was current at allocation and
at free, which is how the profiler turns a traced step into task-graph
buffers. Tensors made while :meth:`LiveBytes.host` is active (swapped-out
copies) are not counted as device memory.
"""
from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .errors import DeviceOutOfMemoryError

__all__ = ["LiveBytes", "BufferEvent", "storage_bytes", "view_key", "storages", "tensors_in", "cast_source",
           "LOW_DTYPES", "gap_key", "told_gaps"]

_DEVICE = torch.ops.prim.device.default


def gap_key(alloc_phase: int, free_phase: int, nbytes: int, uses) -> tuple:
    """How a storage of one trace is told in another's records: its phases, bytes and readers."""
    return alloc_phase, free_phase, nbytes, tuple(sorted(uses))


def told_gaps(events, pick) -> dict:
    """Per :func:`gap_key`, the ``free_gap`` of each followed event that ``pick(event)`` keeps
    (:meth:`LiveBytes.follow_frees`); two alike: neither told (-1)."""
    gaps: dict = {}
    for ev in events:
        if ev.free_gap >= 0 and pick(ev):
            key = gap_key(ev.alloc_phase, ev.free_phase, ev.nbytes, ev.uses)
            gaps[key] = ev.free_gap if key not in gaps else -1
    return gaps


def tensors_in(x: Any, out: list | None = None) -> list[torch.Tensor]:
    """The tensors in an op's arguments or result, in ``tree_leaves`` order.

    Lists, tuples (named ones and ``torch.return_types`` too) and dicts are
    walked; anything else is a leaf. Op arguments and results hold no other
    containers, so this is ``tree_leaves`` filtered to tensors, without its
    per-leaf registry lookups (a real share of a fake trace's time)."""
    if out is None:
        out = []
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            tensors_in(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            tensors_in(y, out)
    return out


def storages(t: torch.Tensor) -> list:
    if type(t) is torch.Tensor or isinstance(t, torch.nn.Parameter) or not hasattr(t, "__tensor_flatten__"):
        try:
            return [t.untyped_storage()]
        except (RuntimeError, NotImplementedError):
            return []
    attrs, _ = t.__tensor_flatten__()
    out = []
    for a in attrs:
        inner = getattr(t, a)
        if isinstance(inner, torch.Tensor):
            out.extend(storages(inner))
    return out


def storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors``."""
    seen: dict[int, int] = {}
    for t in tensors:
        for st in storages(t):
            seen[id(st)] = st.nbytes()
    return sum(seen.values())


def view_key(t: torch.Tensor) -> tuple:
    """The elements of its storage ``t`` covers, as ``(offset, ((size, stride), ...), dtype)``: its dimensions
    of more than one element, outermost first, each merged into the next where together they step evenly
    (a view and its reshape read the same bytes: a slice ``[4, 64, 64]`` and the ``[256, 64]`` a linear
    layer reads of it were two views of 64 KiB each, a pipeline stage receiving it counted 128 KiB)."""
    dims = [(int(n), int(s)) for n, s in zip(t.shape, t.stride()) if n != 1]
    dims.sort(key=lambda d: -d[1])
    out: list[tuple[int, int]] = []
    for n, s in dims:
        if out and out[-1][1] == s * n:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return int(t.storage_offset()), tuple(out), t.dtype


@dataclass
class BufferEvent:
    """One counted storage: bytes, and the phases at allocation and free."""

    nbytes: int
    alloc_phase: int
    free_phase: int = -1  # -1 while alive
    uses: set = field(default_factory=set)
    kind: str = ""
    # phases where an op read the storage whole, and per view smaller than it that an op read
    # (:func:`view_key` -> [bytes, phases]): a pipeline sends such a view alone
    whole: set = field(default_factory=set)
    views: dict = field(default_factory=dict)
    cast: str = ""  # autocast's bf16 cast of this watched parameter (LiveBytes.watch_casts)
    packed: bool = False  # a forward saved it through autograd's saved-tensor hooks (the profiler's trace)
    # made in an earlier phase and freed in this one at its peak so far: how far the phase's peak after its
    # free is below that (:meth:`LiveBytes.follow_frees`); 0: the peak came after it; -1: not followed
    free_gap: int = -1
    # per phase an op read it in and it outlived: how far the phase's peak after the autograd node that read it
    # last there was through stands above the phase's peak until then (:meth:`LiveBytes.follow_reads`; phases
    # where that is 0 left out)
    read_gaps: dict = field(default_factory=dict)
    # ... the same with the phase's steady peaks (``LiveBytes.phase_peak_steady``: a later micro-batch's backward,
    # where that node's gradients add into those there already and the peak may come before it is through)
    steady_read_gaps: dict = field(default_factory=dict)

    def read(self, t: torch.Tensor, storage_bytes: int, phase: int) -> None:
        """An op of ``phase`` read ``t``, a tensor on this storage."""
        self.uses.add(phase)
        try:
            nb = t.numel() * t.element_size()
            key = view_key(t) if nb < storage_bytes else None
        except (RuntimeError, TypeError, ValueError):  # symbolic sizes, a subclass without strides
            key = None
        if key is None:
            self.whole.add(phase)
        else:
            self.views.setdefault(key, [int(nb), set()])[1].add(phase)

    def partial_views(self) -> list[list[int]]:
        """``[[bytes, phase, ...], ...]``: each view read smaller than the storage, with the phases
        that read it and did not also read the whole storage (see ``graph.record.Buffer.views``)."""
        out = []
        for nb, phases in self.views.values():
            only = sorted(phases - self.whole)
            if only:
                out.append([nb, *only])
        return out


_TO_COPY = torch.ops.aten._to_copy.default
LOW_DTYPES = (torch.bfloat16,)  # what autocast's casts a bf16 gather stands in for go to


def cast_source(func, args, kwargs, keys: dict) -> Any:
    """The value ``keys`` maps the storage of op ``func``'s input to, when the op is autocast's cast of
    it to a low precision (None otherwise). ``keys``: ``id(storage) -> value``."""
    if func is not _TO_COPY or kwargs.get("dtype") not in LOW_DTYPES or not args:
        return None
    for st in storages(args[0]):
        v = keys.get(id(st))
        if v is not None:
            return v
    return None


def _accumulating() -> Any:
    """The parameter whose gradient autograd is accumulating in the op running (its copy of a gradient
    not laid out as the parameter: a later micro-batch adds into the one there instead), else None."""
    node = torch._C._current_autograd_node()
    if node is not None and node.name() == "torch::autograd::AccumulateGrad":
        return node.variable
    return None


class LiveBytes(TorchDispatchMode):
    """Count live tensor storage bytes; optionally record per-phase events and enforce a cap.

    ``cap_bytes``: raise :class:`DeviceOutOfMemoryError` when an allocation
    would take live bytes over it. ``describe``: a callable giving context for
    that error (rank, node, predicted peak). ``record``: keep a
    :class:`BufferEvent` per storage and per-phase peaks (profiling).
    ``after(func, args, kwargs, out)``: called after every op is counted (the
    profiler counts FLOPs there: one dispatch mode per op instead of two).
    ``call(func, args, kwargs)``: runs each op in place of ``func(*args, **kwargs)``
    (the profiler's :func:`memflow.profile.fakecache.warm_call`).
    ``device_type`` (e.g. ``"cuda"``): only storages on that kind of device are
    device bytes; the others (pinned swap buffers, a host optimizer's copies)
    count as host bytes. None: every storage is a device byte (the CPU executor,
    the profiler).
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # nothing is compiled under this mode: no dynamo-disable wrapper around every op
        return False

    def __init__(self, cap_bytes: int | None = None, record: bool = False, describe: Callable[[], str] | None = None,
                 after: Callable[..., None] | None = None, call: Callable[..., Any] | None = None,
                 device_type: str | None = None):
        super().__init__()
        self.device_type = None if device_type == "cpu" else device_type
        self.cap_bytes = cap_bytes
        self.record = record
        self.describe = describe
        self.after = after
        self.call = call
        self.locate: Callable[[], str] | None = None  # where the program is (for peak_at)
        self.peak_at = ""
        self.live = 0
        self.peak = 0
        self.phase = 0
        self.phase_peak: dict[int, int] = {}
        self.phase_mark: dict[int, int] = {}  # per phase, its peak so far at the last mark()
        self.events: list[BufferEvent] = []
        self._refs: dict[int, tuple] = {}  # id(storage) -> (weakref, nbytes, event)
        self._host = 0
        self.host_live = 0
        self.host_peak = 0
        # watched parameter casts (the profiler's, :meth:`watch_casts`): their live bytes, and per phase the
        # peak of the live bytes without them
        self._cast_keys: dict | None = None
        self._cast_ids: set = set()
        self.cast_live = 0
        self.phase_peak_nc: dict[int, int] = {}
        self.phase_mark_nc: dict[int, int] = {}
        # per phase, the peak had the saved tensors (events marked ``packed``) freed in it been held to its
        # end (the profiler's, :meth:`hold_saved`; None: not followed)
        self.phase_peak_held: dict[int, int] | None = None
        self.phase_peak_held_nc: dict[int, int] = {}  # ... without the watched casts (:meth:`watch_casts`)
        self._held = 0
        self._held_cast = 0
        self._held_min = 0
        # per backward phase, the peak had what its node's forward read from earlier phases (its inputs) been
        # held, once freed, until the last op that unpacked a saved tensor let its saved tensors go (the
        # profiler's, :meth:`hold_inputs`; None: not followed)
        self.phase_peak_held_in: dict[int, int] | None = None
        self.phase_peak_held_in_nc: dict[int, int] = {}  # ... without the watched casts (:meth:`watch_casts`)
        self._held_in = 0
        self._held_in_cast = 0
        self._hin_n = 0
        self._hin_run = self._hin_run_nc = 0  # (the phase's peak so far with them held)
        self._hin_armed = False  # (an op has unpacked since the last let its saved tensors go)
        # per phase of those followed, the peak had the buffers made before its node's forward that it frees
        # been held to its end (the profiler's, :meth:`hold_old`; None: not followed)
        self.phase_peak_held_f: dict[int, int] | None = None
        self._held_f = 0
        self._hf_cut: dict[int, int] = {}
        # per phase, the peak less the parameter gradients made in it so far (the profiler's, :meth:`follow_grads`;
        # None: not followed): a later micro-batch's backward, where each gradient is there already and the
        # new one, made beside it, is added into it and let go
        self.phase_peak_steady: dict[int, int] | None = None
        self._made = 0
        # ... the same less only the gradients of the parameters the caller calls shared (read by more than one
        # node: under ZeRO-3 the others' are made anew each micro-batch, the shared ones' added into)
        self.phase_peak_steady_shared: dict[int, int] | None = None
        self._made_shared = 0
        self._shared_ids: set | frozenset = frozenset()
        # per phase, the peak had each parameter gradient added into one an earlier phase made been kept instead
        # once added (the profiler's, :meth:`follow_added`; None: not followed): a pipeline stage holding a tied
        # weight whose gradient a later stage's node made first in the trace makes its own there
        self.phase_peak_first: dict[int, int] | None = None
        self._added = 0
        self._kept: set = set()  # (track_kept)
        self.freed_at: dict[int, int] = {}
        # per phase, the buffers made before it freed in it at its peak so far, and the most live bytes since
        # the last of them went (the profiler's, :meth:`follow_frees`; None: not followed)
        self._fr: list | None = None
        # per phase, the events its autograd nodes read (a segment per node: [events, the phase's peak so far as the
        # node was through, most live bytes since]), the node reading now and what it read (:meth:`follow_reads`)
        self._rd: list | None = None
        self._rd_node = 0
        self._rd_pend: list = []
        # per kept storage let go: (phase, that phase's peak and steady peak so far, bytes) (:meth:`early_frees`)
        self.kept_free: dict[int, tuple] = {}

    # --------------------------------------------------------------- control
    def set_phase(self, phase: int) -> None:
        if self._fr is not None:
            self._close_frees()
        if self._rd is not None:
            self._close_reads()
        self.phase = phase
        self.phase_peak[phase] = max(self.phase_peak.get(phase, 0), self.live)
        if self._cast_keys is not None:
            self._nc()
        if self.phase_peak_held is not None:
            self._held = self._held_cast = 0
            self._hp()
        if self.phase_peak_held_in is not None:
            self._held_in = self._held_in_cast = 0
            self._hin_run = self._hin_run_nc = 0
            self._hin_armed = False
            self._hi()
        if self.phase_peak_steady is not None:
            self._made = self._made_shared = 0
            self._st()
        if self.phase_peak_first is not None:
            self._added = 0
            self._fi()
        if self.phase_peak_held_f is not None:
            self._held_f = 0
            self._hf()

    def follow_frees(self) -> None:
        """Follow, per recorded buffer made in an earlier phase and freed in this one at the phase's peak so far,
        how far the phase's peak after its free is below that peak (``BufferEvent.free_gap``): the phase's
        peak had the buffer been smaller by d is the peak less ``min(d, free_gap)`` (a pipeline stage receives
        only the slice of a storage it reads: a concatenation's gradient, one slice of it a skip's)."""
        self._fr = []

    def _close_frees(self) -> None:
        peak, after = self.phase_peak.get(self.phase, 0), 0
        for ent in reversed(self._fr):  # [event, the phase's peak so far at its free, most live bytes since]
            after = max(after, ent[2])
            ent[0].free_gap = peak - after if ent[1] >= peak else 0
        self._fr = []

    def follow_reads(self) -> None:
        """Follow, per recorded buffer made before a phase that an op of the phase reads and that outlives it,
        how far the phase's peak after the autograd node that read it last there is through stands above the
        phase's peak until then (``BufferEvent.read_gaps``): a pipeline stage on which that node is its last
        reader lets it go as the node's saved tensors go, so its phase peaks ``min(bytes, gap)`` below the
        peak with it held (a feature pyramid's head applied to a received scale: the scale, counted beside the
        head's backward, had gone before the weight gradients were made)."""
        self._rd = []
        self._rd_node = 0
        self._rd_pend = []

    def _reads(self, read: list) -> None:
        node = torch._C._current_autograd_node()
        nid = id(node) if node is not None else 0
        if nid != self._rd_node:  # (the node that read before is through: its saved tensors are let go)
            if self._rd_pend:
                self._rd.append(self._rd_segment())
                self._rd_pend = []
            self._rd_node = nid
        self._rd_pend.extend(ev for ev in read if ev.alloc_phase < self.phase)

    def _rd_segment(self) -> list:
        """A reading node's segment (:meth:`_reads`): its events, the phase's peak so far and the live bytes, and
        the same as a later micro-batch's (``phase_peak_steady``; -1 where not followed)."""
        steady = self.phase_peak_steady is not None
        return [self._rd_pend, self.phase_peak.get(self.phase, 0), self.live,
                self.phase_peak_steady.get(self.phase, 0) if steady else -1, self.live - self._made if steady else -1]

    def _close_reads(self) -> None:
        if self._rd_pend:
            self._rd.append(self._rd_segment())
        after = after_s = 0
        done = set()
        for evs, before, since, before_s, since_s in reversed(self._rd):
            after = max(after, since)
            after_s = max(after_s, since_s)
            for ev in evs:
                if id(ev) not in done:  # (its last reading node's segment)
                    done.add(id(ev))
                    if after > before and ev.free_phase < 0:
                        ev.read_gaps[self.phase] = after - before
                    if before_s >= 0 and after_s > before_s and ev.free_phase < 0:
                        ev.steady_read_gaps[self.phase] = after_s - before_s
        self._rd, self._rd_pend, self._rd_node = [], [], 0

    def hold_old(self, cutoffs: dict[int, int]) -> None:
        """Follow, per phase p in ``cutoffs``, what its peak would be were the buffers made before phase
        ``cutoffs[p]`` that it frees held to its end (``phase_peak_held_f``): what a node's forward reads last,
        or what its backward frees of its inputs, held on by another node in a plan (a maker's selective
        policy, a reader's checkpoint, a kept maker's saved tensors)."""
        self.phase_peak_held_f = {}
        self._held_f = 0
        self._hf_cut = dict(cutoffs)

    def _hf(self) -> None:
        if self.phase in self._hf_cut:
            v = self.live + self._held_f
            if v > self.phase_peak_held_f.get(self.phase, -1):
                self.phase_peak_held_f[self.phase] = v

    def follow_grads(self, shared: set | frozenset = frozenset()) -> None:
        """Follow, per phase, its peak less the parameter gradients made in it so far
        (``phase_peak_steady``; the caller tells each one made: :meth:`grad_made`), and less only those
        of the parameters whose ``id()`` is in ``shared`` (``phase_peak_steady_shared``: autograd's copy of
        another's gradient, as it accumulates it, counted there: ZeRO-3 makes it anew each micro-batch; a
        capsule network's routing weights, their einsum's gradient laid out otherwise, 8% under)."""
        self.phase_peak_steady = {}
        self.phase_peak_steady_shared = {}
        self._shared_ids = shared
        self._made = self._made_shared = 0

    def grad_made(self, nbytes: int, shared: bool = False) -> None:
        """A parameter's gradient of ``nbytes`` has just been made in this phase (``shared``: a parameter more
        than one node reads, ``phase_peak_steady_shared``)."""
        self._made += nbytes
        if shared:
            self._made_shared += nbytes

    def _st(self) -> None:
        v = self.live - self._made
        if v > self.phase_peak_steady.get(self.phase, -1):
            self.phase_peak_steady[self.phase] = v
        self._st_shared()

    def _st_shared(self) -> None:
        v = self.live - self._made_shared
        if v > self.phase_peak_steady_shared.get(self.phase, -1):
            self.phase_peak_steady_shared[self.phase] = v

    def follow_added(self) -> None:
        """Follow, per phase, its peak had each gradient added into a parameter's, made in an earlier phase,
        been held from then to the phase's end (``phase_peak_first``; the caller tells each one added:
        :meth:`grad_added`)."""
        self.phase_peak_first = {}
        self._added = 0

    def grad_added(self, nbytes: int) -> None:
        """A new gradient of ``nbytes`` has just been added into a parameter's, made in an earlier phase."""
        self._added += nbytes

    def _fi(self) -> None:
        v = self.live + self._added
        if v > self.phase_peak_first.get(self.phase, -1):
            self.phase_peak_first[self.phase] = v

    def hold_saved(self, min_bytes: int = 0) -> None:
        """Follow, per phase, what its peak would be were the saved tensors of at least ``min_bytes`` it
        frees held to its end (``phase_peak_held``): a swapped node's backward on a GPU while its copies to
        the host still read them (:mod:`memflow.graph.actions`; smaller ones are not swapped), where
        autograd would free each as its op's backward ends."""
        self.phase_peak_held = {}
        self._held = 0
        self._held_min = min_bytes

    def _hp(self) -> None:
        v = self.live + self._held
        if v > self.phase_peak_held.get(self.phase, -1):
            self.phase_peak_held[self.phase] = v
        if self._cast_keys is not None:
            v -= self.cast_live + self._held_cast
            if v > self.phase_peak_held_nc.get(self.phase, -1):
                self.phase_peak_held_nc[self.phase] = v

    def hold_inputs(self, n: int) -> None:
        """Follow, per backward phase of a step of ``n`` nodes, what its peak would be were the buffers made
        before its node's forward that it frees held until the last op that unpacks a saved tensor there is
        through (``phase_peak_held_in``; the caller tells each unpack: :meth:`unpacked`): the node
        recomputed, whose checkpoint holds every input its forward read until the last of its ops that
        saved something has run its backward, where autograd frees each saved one as its own op is through."""
        self.phase_peak_held_in = {}
        self._held_in = 0
        self._hin_n = n

    def unpacked(self) -> None:
        """A saved tensor has just been unpacked (its op's backward is starting)."""
        if self.phase_peak_held_in is not None:
            self._hin_armed = True

    def _hi(self) -> None:
        self._hin_run = max(self._hin_run, self.live + self._held_in)
        if self._cast_keys is not None:
            self._hin_run_nc = max(self._hin_run_nc, self.live + self._held_in - self.cast_live - self._held_in_cast)

    def mark(self) -> None:
        """Note the current phase's peak so far (the profiler marks each tensor autograd saves: a
        recompute's replay stops after the last one)."""
        self.phase_mark[self.phase] = max(self.phase_peak.get(self.phase, 0), self.live)
        if self._cast_keys is not None:
            self._nc()
            self.phase_mark_nc[self.phase] = self.phase_peak_nc[self.phase]

    def watch_casts(self, keys: dict) -> None:
        """Tag every storage made by autocast's bf16 cast of a storage in ``keys`` (``id(storage) -> name``,
        the parameters :func:`memflow.graph.casts.cast_only` found): its event's ``cast`` is the name, and
        ``phase_peak_nc`` / ``phase_mark_nc`` follow the live bytes without the tagged storages."""
        self._cast_keys = dict(keys)

    def _nc(self) -> None:
        v = self.live - self.cast_live
        if v > self.phase_peak_nc.get(self.phase, -1):
            self.phase_peak_nc[self.phase] = v

    def reset_peak(self) -> None:
        self.peak = self.live
        self.peak_at = self.locate() if self.locate is not None else ""
        self.phase_peak = {self.phase: self.live}
        self.host_peak = self.host_live

    @contextlib.contextmanager
    def host(self):
        """Storages made inside this block live in host memory (not counted as device bytes). With a
        ``device_type`` a storage's own device decides instead: a device tensor made here is device bytes."""
        self._host += 1
        try:
            yield
        finally:
            self._host -= 1

    def track(self, tensors: Iterable[torch.Tensor], kind: str = "state") -> None:
        """Count already existing tensors (parameters, optimizer state, the batch)."""
        for t in tensors:
            if isinstance(t, torch.Tensor):
                for st in storages(t):
                    self._add(st, kind, check=False, record=False)

    def resized(self, t: torch.Tensor) -> None:
        """Count the storage behind ``t`` at its size now, after ``untyped_storage().resize_``: a
        storage method, not an op, so dispatch does not see it (ZeRO-3's gathered parameters:
        :mod:`memflow.executor.zero3`). Growing it is an allocation (checked against the cap)."""
        st = t.untyped_storage()
        key = id(st)
        ent = self._refs.get(key)
        if ent is None or ent[0]() is not st:
            self._add(st, "state", record=False)
            return
        ref, old, ev, on_host = ent
        new = st.nbytes()
        if on_host:
            self.host_live += new - old
            self.host_peak = max(self.host_peak, self.host_live)
        else:
            if new > old and self.cap_bytes is not None and self.live + new - old > self.cap_bytes:
                ctx = self.describe() if self.describe else ""
                raise DeviceOutOfMemoryError(
                    f"out of memory{(' on ' + ctx) if ctx else ''}: tried to allocate {new - old} bytes with "
                    f"{self.live} live, capacity {self.cap_bytes} bytes"
                )
            self.live += new - old
            if self.live > self.peak:
                self.peak = self.live
                if self.locate is not None:
                    self.peak_at = self.locate()
            if self.live > self.phase_peak.get(self.phase, 0):
                self.phase_peak[self.phase] = self.live
            if self._cast_keys is not None:
                self._nc()
            if self.phase_peak_held is not None:
                self._hp()
            if self.phase_peak_held_in is not None:
                self._hi()
            if self.phase_peak_held_f is not None:
                self._hf()
            if self._fr:
                self._fr[-1][2] = max(self._fr[-1][2], self.live)
            if self._rd:
                self._rd[-1][2] = max(self._rd[-1][2], self.live)
        self._refs[key] = (ref, new, ev, on_host)

    def event_of(self, t: torch.Tensor) -> BufferEvent | None:
        """The recorded event of the storage behind ``t`` (None if untracked)."""
        for st in storages(t):
            ent = self._refs.get(id(st))
            if ent is not None:
                return ent[2]
        return None

    # ------------------------------------------------------------- counting
    def track_kept(self, tensors: Iterable[torch.Tensor]) -> list[int]:
        """Count existing tensors that stay counted once let go, noting the phase each is let go in
        (``freed_at``, by the keys returned): a traced step's batch inputs, held by the step alone as the
        executor holds them, while the trace's figures count them to its end."""
        keys = []
        for t in tensors:
            for st in storages(t):
                self._add(st, "state", check=False, record=False)
                self._kept.add(id(st))
                keys.append(id(st))
        return keys

    def early_frees(self) -> set:
        """The kept storages (:meth:`track_kept`) let go before their phase's peak by at least their own bytes:
        the phase's peak, and its steady one where followed, counted with them, is at least the peak before they
        went plus their bytes, so that peak less their bytes is the phase's peak without them. Only one let go in
        its phase (two: each could be counted off a peak the other was not gone for)."""
        per_phase: dict[int, int] = {}
        for p, *_ in self.kept_free.values():
            per_phase[p] = per_phase.get(p, 0) + 1
        out = set()
        for key, (p, before, steady, nbytes) in self.kept_free.items():
            if per_phase[p] != 1 or self.phase_peak.get(p, 0) < before + nbytes:
                continue
            if steady is not None and self.phase_peak_steady.get(p, 0) < steady + nbytes:
                continue
            out.add(key)
        return out

    def _on_free(self, key: int, _ref=None) -> None:
        entry = self._refs.pop(key, None)
        if entry is None:
            return
        if key in self._kept:
            self._kept.discard(key)
            self.freed_at[key] = self.phase
            steady = self.phase_peak_steady.get(self.phase, 0) if self.phase_peak_steady is not None else None
            self.kept_free[key] = (self.phase, self.phase_peak.get(self.phase, 0), steady, entry[1])
            return
        _, nbytes, ev, on_host = entry
        if on_host:
            self.host_live -= nbytes
            return
        self.live -= nbytes
        n = self._hin_n
        if (self.phase_peak_held_in is not None and ev is not None and n <= self.phase < 2 * n
                and ev.alloc_phase < 2 * n - 1 - self.phase):
            self._held_in += nbytes
            if key in self._cast_ids:
                self._held_in_cast += nbytes
        if self._hin_armed and ev is not None and ev.packed and n <= self.phase < 2 * n:
            # the op that unpacked last lets its saved tensors go: were it the phase's last such op, a
            # checkpoint's hold would end here; the figure is the peak up to the last of these
            self._hin_armed = False
            self.phase_peak_held_in[self.phase] = self._hin_run
            if self._cast_keys is not None:
                self.phase_peak_held_in_nc[self.phase] = self._hin_run_nc
        if (self.phase_peak_held_f is not None and ev is not None
                and ev.alloc_phase < self._hf_cut.get(self.phase, -1)):
            self._held_f += nbytes
        if self.phase_peak_held is not None and ev is not None and ev.packed and nbytes >= self._held_min:
            self._held += nbytes
            if key in self._cast_ids:
                self._held_cast += nbytes
        if key in self._cast_ids:
            self._cast_ids.discard(key)
            self.cast_live -= nbytes
        if ev is not None:
            ev.free_phase = self.phase
            if self._fr is not None and ev.alloc_phase < self.phase:
                self._fr.append([ev, self.phase_peak.get(self.phase, 0), self.live])

    def _add(self, st, kind: str, check: bool = True, record: bool = True, cast: str = "") -> None:
        key = id(st)
        if key in self._refs:
            ent = self._refs[key]
            if ent[0]() is st:
                return
            self._on_free(key)
        nbytes = st.nbytes()
        # a device run (``device_type``) tells host bytes by where the storage is; a CPU run, where
        # both are host memory, by the block that made it (:meth:`host`)
        if (st.device.type != self.device_type) if self.device_type is not None else self._host:
            self._refs[key] = (weakref.ref(st, lambda r, k=key: self._on_free(k)), nbytes, None, True)
            self.host_live += nbytes
            self.host_peak = max(self.host_peak, self.host_live)
            return
        if check and self.cap_bytes is not None and self.live + nbytes > self.cap_bytes:
            ctx = self.describe() if self.describe else ""
            raise DeviceOutOfMemoryError(
                f"out of memory{(' on ' + ctx) if ctx else ''}: tried to allocate {nbytes} bytes with "
                f"{self.live} live, capacity {self.cap_bytes} bytes"
            )
        ev = None
        if self.record and record:
            ev = BufferEvent(nbytes=nbytes, alloc_phase=self.phase, kind=kind, cast=cast)
            self.events.append(ev)
        self._refs[key] = (weakref.ref(st, lambda r, k=key: self._on_free(k)), nbytes, ev, False)
        self.live += nbytes
        if self.live > self.peak:
            self.peak = self.live
            if self.locate is not None:  # where the peak was reached (reported beside it)
                self.peak_at = self.locate()
        if self.live > self.phase_peak.get(self.phase, 0):
            self.phase_peak[self.phase] = self.live
        if self._cast_keys is not None:
            if cast:
                self._cast_ids.add(key)
                self.cast_live += nbytes
            self._nc()
        if self.phase_peak_held is not None:
            self._hp()
        if self.phase_peak_held_in is not None:
            self._hi()
        if self.phase_peak_held_f is not None:
            self._hf()
        steady = False  # (counted as a later micro-batch's: not autograd's copy of a gradient as it accumulates it)
        if self.phase_peak_steady is not None:
            acc = _accumulating()
            if acc is None:
                steady = True
                self._st()
            elif id(acc) not in self._shared_ids:  # (ZeRO-3 makes a unit's gradient anew: the copy there too)
                self._st_shared()
        if self.phase_peak_first is not None:
            self._fi()
        if self._fr:
            self._fr[-1][2] = max(self._fr[-1][2], self.live)
        if self._rd:
            seg = self._rd[-1]
            seg[2] = max(seg[2], self.live)
            if steady:
                seg[4] = max(seg[4], self.live - self._made)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.record:
            read = [] if self._rd is not None else None
            for t in tensors_in(kwargs, tensors_in(args)):
                for st in storages(t):
                    ent = self._refs.get(id(st))
                    if ent is not None and ent[2] is not None:
                        ent[2].read(t, ent[1], self.phase)
                        if read is not None:
                            read.append(ent[2])
            if read is not None:
                self._reads(read)
        if func is _DEVICE:  # FakeTensor answers every .device through dispatch: ~half the ops of a
            return func(*args, **kwargs)  # fake step; no tensor out, nothing to count or to call again
        out = func(*args, **kwargs) if self.call is None else self.call(func, args, kwargs)
        cast = (cast_source(func, args, kwargs, self._cast_keys) or "") if self._cast_keys is not None else ""
        for t in tensors_in(out):
            for st in storages(t):
                self._add(st, "", cast=cast)
        if self.after is not None:
            self.after(func, args, kwargs, out)
        return out
