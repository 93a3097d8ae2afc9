"""ZeRO-3 / FSDP on the node program: each graph node's parameters sharded, gathered around its passes.

A stage at sharding level ``parameters`` (dp > 1, or dp 1 with the parameters on the host: then a
gather is the copy in from the host and a reduce-scatter nothing) makes every local node an FSDP *unit*: the
trainable parameters only that node reads (:func:`unit_params`). Before the first step each
unit's parameters become views of one flat buffer of the unit's elements padded to a multiple
of ``dp`` (``full``); rank ``r`` copies slice ``r`` of it into a tensor of its own (``shard``:
what its optimizer steps, with its own gradient and state), and the flat buffer's storage is
resized to zero bytes. The node program runs unchanged around it:

* forward of a micro-batch: before node ``x``'s forward its unit is gathered (the storage
  resized back, every rank's slice put into it) and the gather of the *next* unit of the stage
  is started, asynchronously, so it runs beside ``x``'s compute (one unit ahead: during F_x the
  full parameters of ``x`` and of the next unit are alive); after F_x the storage is resized to
  zero again. The first unit of an op is gathered when the op starts (nothing hides it);
* backward: the same in reverse (before B_x the unit is gathered, the gather of the next unit
  below started; after B_x freed). A recomputed or selective node's forward, replayed inside
  B_x, reads the parameters B_x's gather brought back;
* after B_x, on *every* micro-batch (FSDP2's default), the unit's gradients are copied into one
  flat padded tensor, dropped, and reduce-scattered in place (this rank's ``1/dp`` chunk of the
  flat copy receives the sum), asynchronously; the reduce-scatter in flight before it is waited
  for first: its chunk becomes the unit's sharded gradient (a copy, the first micro-batch) or is
  added to it, and the flat copy dies. The one in flight at the end of a backward op is waited
  for there. :meth:`Zero3Sync.finish` divides the sharded gradients by ``dp``: they are the
  shards' gradients. After the step nothing is gathered: the next forward's gathers read the
  updated shards.

Resizing the storage (as FSDP2 does) rather than making a new tensor keeps every tensor autograd
saved that aliases a parameter (the parameter itself, a transposed view of it) pointing at the
storage the backward's gather fills again. The storage resizes are not ops, so
:meth:`memflow.memory.LiveBytes.resized` counts them.

Parameters read by more than one node (a tied embedding read by the first and the last node), or
by another stage too, are not sharded: every rank holds them whole, their gradients are
all-reduced in buckets by a :class:`~memflow.executor.grads.BucketedAllReduce` during the last
micro-batch's backward (as without sharding), and every rank steps them whole.

torch's ``fully_shard`` (FSDP2) is not used: it wraps modules and runs its collectives from
module hooks, while a stage here is a list of graph nodes, not a module, and the collectives
must sit exactly at the node boundaries the simulator prices (:mod:`simulator.zero3`). So the
collectives are called directly: on NCCL ``all_gather_into_tensor`` and
``reduce_scatter_tensor`` (the in-place form: the output is this rank's chunk of the input); on
gloo, forms that make no temporary on any thread: ``dp`` in-place ``broadcast``\\ s of the slices
into the flat buffer, and ``dp`` in-place ``reduce``\\ s of the flat copy's chunks, each to its
owner. gloo's list-form ``reduce_scatter`` (ZeRO-2's) makes a temporary of ``1/dp`` of the flat
copy on gloo's own thread, where :class:`~memflow.memory.LiveBytes` (a dispatch mode of the
calling thread) does not see it: measured as peak RSS on two processes, a 100 MiB flat copy's
``reduce_scatter`` grew it by 55.6 MiB (``reduce_scatter_tensor`` by 102.6 MiB,
``all_gather_into_tensor`` by 102.0 MiB), its two ``reduce``\\ s by 5.0 MiB and the two
``broadcast``\\ s by 1.0 MiB (noise).

Parameters on the host (offload ``optimizer+parameters``, ``host=True``): each unit's shard is a
host tensor (pinned on CUDA) that the host optimizer steps in place, and is never kept on the
device. Right before a gather this rank's slice of the flat buffer is filled from it: on the CPU a
plain copy (the slice is what gloo's broadcast sends; the accounting counts the shard, made inside
:meth:`~memflow.memory.LiveBytes.host`, as host bytes), on CUDA a non-blocking copy on a side
stream that the gather's stream waits for, then NCCL's in-place ``all_gather_into_tensor`` (the
input is the output's own chunk): no separate device copy of the shard exists. After a
reduce-scatter is waited for, this rank's chunk is copied (first micro-batch) or added into the
unit's gradient slice in host memory, and the flat copy dies. torch's CPU offload for FSDP2
(``CPUOffloadPolicy``) is not used for the reason ``fully_shard`` is not (above).

In bf16 (autocast over fp32 master weights) a unit's parameters that autocast only ever casts
(:mod:`memflow.graph.casts`: every forward read a cast to bf16) form a part of their own, gathered in
bf16: this rank's slice of it is its fp32 shard rounded as autocast's cast rounds, and the node reads
each such parameter as :class:`_Low` (the gathered bf16 slice, whose backward converts the gradient
to the fp32 parameter as the cast's backward does), so no unsharded bf16 copy is made and the
numerics are plain autocast's. The rest stays an fp32 part; each part is padded to ``dp`` elements,
and the gradients' flat copy holds both parts' in fp32 (:class:`_Unit`).

Slicing flat buffers is exact only for an elementwise optimizer (:data:`memflow.executor.zero.ELEMENTWISE`).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterable

import torch
import torch.distributed as dist

from ..kinds import SHARD_PARAMETERS
from .grads import BucketedAllReduce
from .zero import flat_grads, flatten_params, release

__all__ = ["Zero3Sync", "unit_params"]


def unit_params(owned: list[list[torch.nn.Parameter]], readers: dict[int, set],
                whole: set[int] = frozenset()) -> tuple[list, list]:
    """Split ``owned[x]`` (the parameters local node ``x`` makes final, in its order) into the
    sharded unit of each node (parameters only ``x`` reads, all of one dtype) and the rest (read by
    several nodes, or in ``whole``: ids of parameters a node hands on as views,
    :func:`memflow.graph.aliases.escaping_params`: kept whole). ``readers``: id(parameter) -> the nodes
    reading it."""
    units, rest = [], []
    for ps in owned:
        mine = [p for p in ps if len(readers.get(id(p), ())) <= 1 and id(p) not in whole]
        if mine and len({p.dtype for p in mine}) > 1:  # (one flat buffer per unit: one dtype)
            mine = []
        ids = {id(p) for p in mine}
        units.append(mine)
        rest.append([p for p in ps if id(p) not in ids])
    return units, rest


class _Low(torch.autograd.Function):
    """A bf16-gathered parameter as its node reads it: the gathered bf16 slice (an alias with a version
    counter of its own: the gathers refill the buffer in place), whose gradient goes back to the fp32
    parameter converted, as the backward of autocast's cast converts it (:mod:`memflow.graph.casts`)."""

    @staticmethod
    def forward(ctx, p, w):  # noqa: ARG004
        return torch.empty(0, dtype=w.dtype, device=w.device).set_(w.untyped_storage(), w.storage_offset(),
                                                                    w.shape, w.stride())

    @staticmethod
    def backward(ctx, g):
        return g.to(torch.float32), None


class _Part:
    """One flat buffer of a unit: its parameters, padded to a multiple of ``dp``, gathered in their own
    dtype (fp32) or, ``low``, in bf16 (the parameters' data is then an fp32 storage of zero bytes, never
    filled: the node reads the bf16 slices through :class:`_Low`)."""

    __slots__ = ("params", "numel", "padded", "k", "full", "shard", "acc", "nbytes", "low", "offsets")

    def __init__(self, params: list[torch.nn.Parameter], dp: int, rank: int, host: bool, low: bool):
        self.params = params
        self.low = low
        self.numel = sum(p.numel() for p in params)
        self.padded = -(-self.numel // dp) * dp
        self.k = self.padded // dp
        full = flatten_params(params, self.padded)
        with torch.no_grad():
            # what this rank keeps and steps: a leaf tensor of its own (host: in host memory)
            mine = full[rank * self.k:(rank + 1) * self.k]
            if host and full.device.type != "cpu":  # pragma: no cover - needs a GPU
                self.shard = torch.nn.Parameter(mine.to("cpu").pin_memory())
            elif host:
                self.shard = torch.nn.Parameter(mine.to("cpu", copy=True))
            else:
                self.shard = torch.nn.Parameter(mine.clone())
        self.offsets = []
        off = 0
        for p in params:
            self.offsets.append(off)
            off += p.numel()
        if low:  # (the fp32 buffer stays empty: the parameters' data, never read)
            full.untyped_storage().resize_(0)
            full = torch.empty(self.padded, dtype=torch.bfloat16, device=full.device)
        self.full = full
        self.nbytes = self.padded * full.element_size()
        full.untyped_storage().resize_(0)
        self.acc: torch.Tensor | None = None  # this rank's slice of the gradient, summed over micro-batches

    def read(self, i: int) -> torch.Tensor:
        """Parameter ``i`` as its node reads it from the gathered bf16 buffer (``low`` only)."""
        p = self.params[i]
        return _Low.apply(p, self.full[self.offsets[i]:self.offsets[i] + p.numel()].view(p.shape))


class _Unit:
    """A node's sharded parameters: one :class:`_Part` per gather dtype (bf16 first), gathered, freed and
    reduce-scattered together; the gradients' flat copy holds every part's, each padded."""

    __slots__ = ("x", "parts")

    def __init__(self, x: int, params: list[torch.nn.Parameter], dp: int, rank: int, host: bool = False,
                 low: set | None = None):
        self.x = x
        lows = [p for p in params if low and id(p) in low]
        rest = [p for p in params if not (low and id(p) in low)]
        self.parts = [_Part(ps, dp, rank, host, lw) for ps, lw in ((lows, True), (rest, False)) if ps]


class Zero3Sync:
    """ZeRO-3's gathers and gradient sync of one stage (see the module's docstring); the interface of
    :class:`~memflow.executor.grads.BucketedAllReduce` plus the node hooks the stage calls. ``low``: ids
    of the parameters gathered in bf16 (:mod:`memflow.graph.casts`); ``reads``: per local node, the
    positions of its call's arguments that are such a parameter, ``[(position, id(parameter))]``."""

    level = SHARD_PARAMETERS

    def __init__(self, units: list[list[torch.nn.Parameter]], rest: list[list[torch.nn.Parameter]], group: Any,
                 dp: int, rank: int, cap_bytes: int, host: bool = False, low: set | None = None,
                 reads: dict | None = None):
        self.group = group
        self.host = host  # the units' shards (and gradient slices) in host memory
        self.dp = dp
        self.rank = rank
        # (dp 1, parameters on the host: no collective; a gather is the copy in, a reduce-scatter nothing)
        self.gloo = dp > 1 and dist.get_backend(group) == "gloo"
        self.ranks = dist.get_process_group_ranks(group) if dp > 1 else []  # (broadcast sources)
        low = low or set()
        self.units: dict[int, _Unit] = {x: _Unit(x, ps, dp, rank, host, low) for x, ps in enumerate(units) if ps}
        self.reads = reads or {}
        dev = next((u.parts[0].full.device for u in self.units.values()), None)
        self.copy_stream = torch.cuda.Stream(dev) if host and dev is not None and dev.type == "cuda" \
            else None  # pragma: no cover - needs a GPU
        self.order = sorted(self.units)  # local nodes with a unit
        self.rest = BucketedAllReduce(rest, group, dp, cap_bytes)
        self.buckets = [pt for x in self.order for pt in self.units[x].parts]  # (StageOptimizer: what is stepped)
        self.live = None
        self.param_ptrs: set | None = None  # the swapper's: gathered storages are parameters, never swapped
        self.pending: dict[int, list] = {}  # unit -> works of its gather in flight
        self.inflight: tuple | None = None  # (works, flat copy, unit) of the reduce-scatter in flight

    # -------------------------------------------------------------- state
    def pieces(self) -> list[torch.Tensor]:
        """The tensors this rank's optimizer steps for the units: its shard of each part."""
        return [pt.shard for pt in self.buckets]

    def host_pieces(self) -> list[torch.Tensor]:
        """The units' shards where they live in host memory (none unless ``host``)."""
        return self.pieces() if self.host else []

    def _host(self):
        return self.live.host() if self.host and self.live is not None else contextlib.nullcontext()

    def fulls(self) -> list[torch.Tensor]:
        """The units' flat buffers (zero bytes between gathers)."""
        return [pt.full for pt in self.buckets]

    def bind(self, x: int, fn):
        """``fn`` (local node ``x``'s call) reading its bf16-gathered parameters from the gathered buffer:
        each is passed in place of the parameter (the stage wraps the node's action around this, so a
        recompute's replay reads the backward's gather)."""
        u = self.units.get(x)
        where = {id(p): (pt, i) for pt in (u.parts if u is not None else ()) if pt.low for i, p in enumerate(pt.params)}
        subs = [(pos, where[i]) for pos, i in self.reads.get(x, ()) if i in where]
        if not subs:
            return fn

        def call(*args):
            args = list(args)
            for pos, (pt, i) in subs:
                args[pos] = pt.read(i)
            return fn(*args)
        return call

    def _resize(self, pt: _Part, nbytes: int) -> None:
        st = pt.full.untyped_storage()
        if self.param_ptrs is not None and st.nbytes():
            self.param_ptrs.discard(st.data_ptr())
        st.resize_(nbytes)
        if self.param_ptrs is not None and nbytes:
            self.param_ptrs.add(st.data_ptr())
        if self.live is not None:
            self.live.resized(pt.full)

    # ------------------------------------------------------------ gathers
    def _start_gather(self, x: int) -> None:
        u = self.units[x]
        if x in self.pending or u.parts[0].full.untyped_storage().nbytes():
            return
        works = []
        for pt in u.parts:
            self._resize(pt, pt.nbytes)
            works += self._gather_part(pt)
        self.pending[x] = works

    def _gather_part(self, pt: _Part) -> list:
        k = pt.k
        with torch.no_grad():
            mine = pt.full[self.rank * k:(self.rank + 1) * k]
            if self.copy_stream is not None:  # pragma: no cover - needs GPUs (host shard: side-stream copy-in)
                src = pt.shard.detach()
                if pt.low:  # rounded to bf16 on the host (a non-blocking copy would convert through an fp32
                    # temporary on the device), into a pinned buffer the caching host allocator keeps until
                    # the copy has read it
                    src = torch.empty(pt.k, dtype=torch.bfloat16, pin_memory=True).copy_(src)
                self.copy_stream.wait_stream(torch.cuda.current_stream(mine.device))
                with torch.cuda.stream(self.copy_stream):
                    mine.copy_(src, non_blocking=True)
                torch.cuda.current_stream(mine.device).wait_stream(self.copy_stream)
                return [dist.all_gather_into_tensor(pt.full, mine, group=self.group, async_op=True)] \
                    if self.dp > 1 else []
            if self.dp == 1:  # (parameters on the host, one rank: the copy in is the gather; rounded for a low part)
                pt.full.copy_(pt.shard.detach())
                return []
            if self.gloo:  # (this rank's slice from its shard: a plain copy, rounded to bf16 for a low part)
                mine.copy_(pt.shard.detach())
                return [dist.broadcast(pt.full[r * k:(r + 1) * k], src=self.ranks[r], group=self.group,
                                       async_op=True) for r in range(self.dp)]
            if pt.low:  # pragma: no cover - needs GPUs (NCCL's in-place form: the input is the output's chunk)
                mine.copy_(pt.shard.detach())
                return [dist.all_gather_into_tensor(pt.full, mine, group=self.group, async_op=True)]
            return [dist.all_gather_into_tensor(pt.full, pt.shard.detach(), group=self.group,
                                                async_op=True)]  # pragma: no cover - needs GPUs

    def _gathered(self, x: int) -> None:
        self._start_gather(x)
        for w in self.pending.pop(x, ()):
            w.wait()

    def _free(self, x: int) -> None:
        for pt in self.units[x].parts:
            self._resize(pt, 0)

    def _next(self, x: int, step: int) -> int | None:
        i = self.order.index(x) + step
        return self.order[i] if 0 <= i < len(self.order) else None

    def before_forward(self, x: int) -> None:
        if x in self.units:
            self._gathered(x)
            nxt = self._next(x, 1)
            if nxt is not None:  # the next unit's gather runs beside this node's forward
                self._start_gather(nxt)

    def after_forward(self, x: int) -> None:
        if x in self.units:
            self._free(x)

    def before_backward(self, x: int) -> None:
        if x in self.units:
            self._gathered(x)
            nxt = self._next(x, -1)
            if nxt is not None:
                self._start_gather(nxt)

    def after_backward(self, x: int) -> None:
        """B_x has run: free the unit's parameters, reduce-scatter its gradients."""
        if x in self.units:
            self._free(x)
            self._launch(self.units[x])
        self.rest.node_done(x)

    def end_backward(self) -> None:
        """A backward op has ended: wait for the reduce-scatter still in flight."""
        self._wait()

    # ------------------------------------------------------ reduce-scatter
    def _wait(self) -> None:
        if self.inflight is None:
            return
        works, flat, u = self.inflight
        self.inflight = None
        for w in works:
            w.wait()
        off = 0
        for pt in u.parts:
            mine = flat[off + self.rank * pt.k:off + (self.rank + 1) * pt.k]  # (the sum, in place)
            off += pt.padded
            if self.host:  # copied out to the part's gradient slice in host memory
                with self._host():
                    if pt.acc is None:
                        pt.acc = torch.empty_like(pt.shard, device=pt.shard.device, pin_memory=pt.shard.is_pinned())
                        pt.acc.copy_(mine)
                    else:
                        pt.acc.add_(mine.to(pt.acc.device))
            elif pt.acc is None:
                pt.acc = mine.clone()
            else:
                pt.acc.add_(mine)
            del mine
        release(flat, self.live)  # (the flat copy dies, whatever gloo's thread still holds)
        del flat

    def _launch(self, u: _Unit) -> None:
        self._wait()
        flat = flat_grads([(pt.params, pt.padded - pt.numel) for pt in u.parts])
        works, off = [], 0
        for pt in u.parts:
            k, region = pt.k, flat[off:off + pt.padded]
            off += pt.padded
            if self.dp == 1:  # (one rank: the flat copy is the sum)
                continue
            if self.gloo:  # (a chunk of the other ranks' copies is left undefined: they die)
                works += [dist.reduce(region[r * k:(r + 1) * k], dst=self.ranks[r], group=self.group, async_op=True)
                          for r in range(self.dp)]
            else:  # pragma: no cover - needs GPUs (NCCL's in-place form: the output is the input's own chunk)
                works.append(dist.reduce_scatter_tensor(region[self.rank * k:(self.rank + 1) * k], region,
                                                        group=self.group, async_op=True))
        self.inflight = (works, flat, u)

    # -------------------------------------------------------------- sync
    def start_last_microbatch(self) -> None:
        self.rest.start_last_microbatch()

    def node_done(self, x: int) -> None:  # (the stage calls after_backward instead)
        pass

    def finish(self) -> None:
        """The units' summed slices, averaged: the shards' gradients; the whole parameters' all-reduce."""
        self._wait()
        self.rest.finish()
        for pt in self.buckets:
            if pt.acc is not None:
                pt.acc.div_(self.dp)
            pt.shard.grad = pt.acc
            pt.acc = None

    def zero_grad(self) -> None:
        for pt in self.buckets:
            pt.shard.grad = None
            pt.acc = None

    def gather(self) -> None:
        """After the step: nothing (the next forward gathers the updated shards)."""

    def tracked(self) -> Iterable[torch.Tensor]:
        return self.fulls()
