"""ZeRO-2 on the node program: gradients reduce-scattered per bucket, each rank stepping its slice.

A stage at sharding level ``gradients`` keeps its parameters whole; its data-parallel
ranks split every gradient bucket (the buckets :func:`memflow.buckets.grad_buckets` fixes,
the ones :class:`~memflow.executor.grads.BucketedAllReduce` all-reduces) into ``dp`` equal
slices, and rank ``r`` keeps, steps and holds optimizer state for slice ``r`` of each:

* before the first step each bucket's parameters become views of one flat buffer of the
  bucket's elements padded to a multiple of ``dp`` (their old storages die); slice ``r`` of
  that buffer is the tensor this rank's optimizer steps (a view: stepping it updates the
  parameters in place);
* during the last micro-batch's backward, a bucket is synchronised once the node backward
  that completes it has run, as the all-reduce is: the bucket in flight before it is waited
  for (its flat copy freed), the bucket's gradients are copied into one new flat tensor
  (padded), the gradients are dropped, and ``reduce_scatter_tensor`` sums the flat copy's slices
  into this rank's slice (one new tensor of ``1/dp`` of the bucket), asynchronously. So at most
  one flat copy is alive, made beside its own gradients and then in their place;
* :meth:`ReduceScatterSync.finish` starts the buckets left, waits, frees the copies and divides
  the slices by ``dp``; they are the sliced tensors' gradients;
* after the step, ``all_gather_into_tensor`` in place puts every rank's updated slice back
  into each bucket's flat buffer (one collective per bucket).

torch's own ZeRO-2 (FSDP2 ``fully_shard`` with ``reshard_after_forward=False``) wraps modules
and runs its collectives from module hooks, and a stage here is a list of graph nodes, not a
module; ``ZeroRedundancyOptimizer`` shards only the optimizer state. So the collectives are
called directly: on NCCL ``reduce_scatter_tensor`` and in-place ``all_gather_into_tensor``. gloo
(torch 2.13) runs both too, but each makes a temporary of the whole bucket on the calling
thread (measured under :class:`~memflow.memory.LiveBytes`: a flat bucket's bytes more at every
sync and every gather), so on gloo the same collectives are the list forms that make none:
``reduce_scatter`` of the flat copy's ``dp`` equal chunks (views), and ``dp`` in-place
broadcasts of the slices (each rank's from its owner; the simulator times them so).

Slicing flat buffers is exact only for an optimizer whose update of an element reads that
element alone (SGD, Adam, AdamW, ...): :data:`ELEMENTWISE` names them, and any other is refused.
Parameters outside every bucket (replicas of a parameter read on several stages, summed by
:func:`~memflow.executor.grads.sync_shared`) are stepped whole by every rank.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ..buckets import dtype_kind, grad_buckets
from ..errors import ConfigError

__all__ = ["ReduceScatterSync", "ELEMENTWISE", "check_elementwise", "flat_grads", "flatten_params", "release"]

#: optimizers whose step updates each element from that element's own state alone
ELEMENTWISE = ("SGD", "Adam", "AdamW", "Adamax", "Adagrad", "RMSprop", "Rprop", "NAdam", "RAdam", "ASGD")


def check_elementwise(opt: torch.optim.Optimizer, level: str) -> None:
    if type(opt).__name__ not in ELEMENTWISE or type(opt).__module__.split(".")[:2] != ["torch", "optim"]:
        raise ConfigError(f"sharding level {level!r} steps slices of flat gradient buckets, exact only for an "
                          f"elementwise optimizer (torch.optim {', '.join(ELEMENTWISE)}); the model file's "
                          f"optimizer is {type(opt).__module__}.{type(opt).__name__}: use sharding 'optimizer' "
                          f"or 'none'")


def flatten_params(params: list[torch.nn.Parameter], padded: int) -> torch.Tensor:
    """One flat buffer of ``padded`` elements (zeros past the parameters) holding ``params`` in order;
    each parameter becomes a view of it (its old storage dies)."""
    p0 = params[0]
    flat = torch.zeros(padded, dtype=p0.dtype, device=p0.device)
    off = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            flat[off:off + n].copy_(p.detach().reshape(-1))
            p.data = flat[off:off + n].view(p.shape)
            off += n
    return flat


def release(flat: torch.Tensor, live: Any = None) -> None:
    """A reduced flat copy dies now: its storage emptied in place (and ``live`` told), since gloo's worker
    thread can hold the work, and views of the copy, a moment after ``wait()`` returns, which would keep
    it beside the next one: a peak that comes and goes with the threads' timing."""
    flat.untyped_storage().resize_(0)
    if live is not None:
        live.resized(flat)


def flat_grads(groups: list[tuple[list[torch.nn.Parameter], int]]) -> torch.Tensor:
    """One new flat tensor of each group's parameters' gradients (zeros for a parameter without one)
    followed by the group's ``pad`` zeros, group after group (dtype and device of the parameters); the
    gradients are dropped (the copy is made beside them and then stands in their place: the sync
    point both ZeRO levels are priced at)."""
    p0 = groups[0][0][0]
    flat = torch.empty(sum(sum(p.numel() for p in ps) + pad for ps, pad in groups), dtype=p0.dtype, device=p0.device)
    off = 0
    for params, pad in groups:  # (filled in place: a zero tensor per parameter without a gradient, an
        # encoder's unread pooler, was memory beside the copy no plan counted)
        for p in params + [None] * (pad > 0):
            n = p.numel() if p is not None else pad
            if p is not None and p.grad is not None:
                flat[off:off + n].copy_(p.grad.reshape(-1))
            else:
                flat[off:off + n].zero_()
            off += n
    for params, _ in groups:
        for p in params:
            p.grad = None
    return flat


class _Bucket:
    __slots__ = ("x", "params", "numel", "padded", "flat_params", "piece", "grad")

    def __init__(self, x: int, params: list[torch.nn.Parameter], dp: int, rank: int):
        self.x = x
        self.params = params
        self.numel = sum(p.numel() for p in params)
        self.padded = -(-self.numel // dp) * dp
        flat = self.flat_params = flatten_params(params, self.padded)
        k = self.padded // dp
        self.piece = flat[rank * k:(rank + 1) * k]  # what this rank steps: a view, a leaf
        self.grad: torch.Tensor | None = None


class ReduceScatterSync:
    """ZeRO-2's gradient sync of one stage (see the module's docstring); the interface of
    :class:`~memflow.executor.grads.BucketedAllReduce`. ``owned[x]``: the parameters local node
    ``x``'s backward makes final, in the order it reads them."""

    def __init__(self, owned: list[list[torch.nn.Parameter]], group: Any, dp: int, rank: int, cap_bytes: int):
        self.group = group
        self.dp = dp
        self.gloo = dist.get_backend(group) == "gloo"
        self.ranks = dist.get_process_group_ranks(group)  # global rank of each dp rank (broadcast sources)
        self.active = False
        self.live = None  # the rank's LiveBytes (the stage attaches it): told of the flat copy's emptying
        plan = grad_buckets([[(p.numel() * p.element_size(), dtype_kind(p.dtype)) for p in ps] for ps in owned], max(1, cap_bytes))
        self.buckets = [_Bucket(x, [owned[o][i] for o, i in members], dp, rank) for x, members in plan]
        self.launched = 0
        self.inflight: tuple | None = None  # (work, flat copy) of the bucket being reduced

    # -------------------------------------------------------------- state
    def pieces(self) -> list[torch.Tensor]:
        """The tensors this rank's optimizer steps: its slice of every bucket."""
        return [b.piece for b in self.buckets]

    # --------------------------------------------------------------- sync
    def start_last_microbatch(self) -> None:
        self.active = True
        self.launched = 0

    def node_done(self, x: int) -> None:
        if self.active and x > 0:
            self._launch_until(x)

    def _launch_until(self, x: int) -> None:
        while self.launched < len(self.buckets) and self.buckets[self.launched].x >= x:
            self._launch(self.buckets[self.launched])
            self.launched += 1

    def _wait(self) -> None:
        if self.inflight is not None:
            work, flat = self.inflight
            work.wait()
            self.inflight = None
            release(flat, self.live)

    def _launch(self, b: _Bucket) -> None:
        self._wait()
        flat = flat_grads([(b.params, b.padded - b.numel)])
        b.grad = torch.empty(b.padded // self.dp, dtype=flat.dtype, device=flat.device)
        if self.gloo:
            work = dist.reduce_scatter(b.grad, list(flat.chunk(self.dp)), group=self.group, async_op=True)
        else:
            work = dist.reduce_scatter_tensor(b.grad, flat, group=self.group, async_op=True)
        self.inflight = (work, flat)

    def finish(self) -> None:
        """Start the buckets left, wait for the last, average the slices: the slices' gradients."""
        if not self.active:
            return
        self._launch_until(0)
        self._wait()
        for b in self.buckets:
            b.grad.div_(self.dp)
            b.piece.grad = b.grad
            b.grad = None
        self.active = False

    def zero_grad(self) -> None:
        for b in self.buckets:
            b.piece.grad = None

    def gather(self) -> None:
        """After the step: every rank's updated slice into each bucket's parameters."""
        for b in self.buckets:
            if self.gloo:
                k = b.padded // self.dp
                for r in range(self.dp):
                    dist.broadcast(b.flat_params[r * k:(r + 1) * k], src=self.ranks[r], group=self.group)
            else:
                dist.all_gather_into_tensor(b.flat_params, b.piece, group=self.group)
