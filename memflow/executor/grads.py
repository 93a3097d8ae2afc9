"""Gradient synchronisation: data-parallel buckets and cross-stage tied weights.

:class:`BucketedAllReduce` is what ``DistributedDataParallel`` does
internally, written out because a pipeline stage here is a list of graph
nodes rather than one module. Its buckets are fixed before the first step by
:func:`memflow.buckets.grad_buckets`, the rule the simulator sizes
and times them by: gradients in backward order (a parameter's is final after
the backward of the first node that reads it), a gradient of at least
``cap_bytes`` on its own, the others filling a bucket up to ``cap_bytes``.
During the last micro-batch's backward, after each node's backward the stage
calls :meth:`~BucketedAllReduce.node_done`, which starts the all-reduce of every
bucket that node completes, asynchronously, while the backward goes on; the
buckets the stage's first node completes start in :meth:`~BucketedAllReduce.finish`,
which then waits for all of them and divides by ``dp``.

A bucket of one gradient is all-reduced in place. A bucket of several is
flattened into one new tensor, and the gradients become views of it (the
originals die at once): the copy costs its bytes only while it is made, beside
the gradients, at most ``cap_bytes`` at a time, nothing is copied back, and no
bucket stays in flight beside its gradients.

Parameters read by nodes on several stages (GPT-2's ``wte`` / ``lm_head``)
have a replica on each of those stages; :func:`sync_shared` sums their
gradients in place over a process group holding all the ranks of those stages
and divides by ``dp`` (sum over stages of the dp average).
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.distributed as dist

from ..buckets import dtype_kind, grad_buckets
from ..graph.gloo import released, settled

__all__ = ["BucketedAllReduce", "sync_shared"]


class BucketedAllReduce:
    """The data-parallel all-reduce of one stage's gradients. ``owned[x]``: the parameters whose
    gradient the stage's local node ``x``'s backward makes final (the node reads them first), in
    the order it reads them."""

    def __init__(self, owned: list[list[torch.nn.Parameter]], group: Any, dp: int, cap_bytes: int):
        self.group = group
        self.dp = dp
        self.active = False
        self.inflight: list[tuple[Any, torch.Tensor, int]] = []  # (work, flat copy, its count before the work)
        plan = grad_buckets([[(p.numel() * p.element_size(), dtype_kind(p.dtype)) for p in ps] for ps in owned],
                            max(1, cap_bytes)) if dp > 1 else []
        self.buckets = [(x, [owned[o][i] for o, i in members]) for x, members in plan]
        self.launched = 0  # buckets started this step (they start in plan order)

    def start_last_microbatch(self) -> None:
        """The coming backward makes the final gradients."""
        self.active = self.dp > 1
        self.launched = 0

    def node_done(self, x: int) -> None:
        """Local node ``x``'s backward has run: start the buckets it completes (its first node's
        wait for :meth:`finish`, after the stage's sends)."""
        if self.active and x > 0:
            self._launch_until(x)

    def _launch_until(self, x: int) -> None:
        while self.launched < len(self.buckets) and self.buckets[self.launched][0] >= x:
            self._launch(self.buckets[self.launched][1])
            self.launched += 1

    def _launch(self, params: list[torch.nn.Parameter]) -> None:
        # a parameter the step does not reach (an encoder's pooler an encoder-decoder never reads) has no
        # gradient on any rank (the captured program is the same on every rank): left out, as plain
        # training's optimizer leaves it; a zero gradient was memory no plan counted (BERT2BERT's pooler,
        # twice over in the bucket's copy: 8 KiB under at dp 2) and an update plain training never makes
        params = [p for p in params if p.grad is not None]
        if not params:
            return
        if len(params) == 1 and params[0].grad.is_contiguous():
            flat = params[0].grad
        else:  # one new tensor; the gradients become views of it
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            off = 0
            for p in params:
                n = p.grad.numel()
                p.grad = flat[off:off + n].view(p.grad.shape)
                off += n
        count = flat._use_count()
        self.inflight.append((dist.all_reduce(flat, group=self.group, async_op=True), flat, count))

    def finish(self) -> None:
        """Start the buckets left, wait for every one, average the gradients."""
        if not self.active:
            return
        self._launch_until(0)
        for work, flat, _ in self.inflight:
            work.wait()
            flat.div_(self.dp)
        work = flat = None
        counts = [(f, n) for _, f, n in self.inflight]
        self.inflight.clear()
        if counts and counts[0][0].device.type == "cpu":
            # gloo's worker thread holds each work, and the bucket in it, a moment after wait() returns
            # (memflow.graph.gloo): the last step's bucket outlived its gradients into the next step's
            # first backward once in CI (25,620 B above the plan)
            released(counts)
        self.active = False


def sync_shared(shared: list[tuple[list[torch.nn.Parameter], Any]], dp: int) -> None:
    """Sum the grads of cross-stage replicas over their group; divide by ``dp``."""
    for params, group in shared:
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            with settled(p.grad) if p.grad.device.type == "cpu" else contextlib.nullcontext():
                dist.all_reduce(p.grad, group=group)
            if dp > 1:
                p.grad.div_(dp)
