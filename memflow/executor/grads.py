"""Gradient synchronisation: data-parallel buckets and cross-stage tied weights.

:class:`BucketedAllReduce` is what ``DistributedDataParallel`` does
internally, written out because a pipeline stage here is a list of graph
nodes rather than one module: during the last micro-batch's backward, a
``register_post_accumulate_grad_hook`` on each parameter counts its
accumulations; when a parameter's gradient is final it joins the current
bucket, and a full bucket is flattened and all-reduced asynchronously over
the stage's data-parallel group while the backward pass goes on. Before the
optimizer step every bucket is waited for, divided by ``dp`` and copied back.

Parameters read by nodes on several stages (GPT-2's ``wte`` / ``lm_head``)
have a replica on each of those stages; :func:`sync_shared` sums their
gradients over a process group holding all the ranks of those stages and
divides by ``dp`` (sum over stages of the dp average).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

__all__ = ["BucketedAllReduce", "sync_shared"]


class BucketedAllReduce:
    def __init__(self, params: list[torch.nn.Parameter], expected: dict[int, int], group: Any, dp: int,
                 cap_bytes: int):
        self.params = params
        self.expected = expected  # id(param) -> accumulations per micro-batch
        self.group = group
        self.dp = dp
        self.cap = max(1, cap_bytes)
        self.active = False
        self.count: dict[int, int] = {}
        self.ready: set[int] = set()
        self.bucket: list[torch.nn.Parameter] = []
        self.bucket_bytes = 0
        self.inflight: list[tuple[Any, torch.Tensor, list[torch.nn.Parameter]]] = []
        self.handles = []
        if dp > 1:
            for p in params:
                self.handles.append(p.register_post_accumulate_grad_hook(self._hook))

    def start_last_microbatch(self) -> None:
        """Arm the hooks: the coming backward makes the final gradients."""
        self.active = self.dp > 1
        self.count.clear()
        self.ready.clear()

    def _hook(self, p: torch.nn.Parameter) -> None:
        if not self.active:
            return
        c = self.count.get(id(p), 0) + 1
        self.count[id(p)] = c
        if c >= self.expected.get(id(p), 1) and id(p) not in self.ready:
            self._add(p)

    def _add(self, p: torch.nn.Parameter) -> None:
        self.ready.add(id(p))
        if self.bucket and self.bucket[0].grad.dtype != p.grad.dtype:
            self._launch()
        self.bucket.append(p)
        self.bucket_bytes += p.grad.numel() * p.grad.element_size()
        if self.bucket_bytes >= self.cap:
            self._launch()

    def _launch(self) -> None:
        if not self.bucket:
            return
        flat = torch.cat([p.grad.reshape(-1) for p in self.bucket])
        work = dist.all_reduce(flat, group=self.group, async_op=True)
        self.inflight.append((work, flat, self.bucket))
        self.bucket = []
        self.bucket_bytes = 0

    def finish(self) -> None:
        """Launch what is left, wait for every bucket, write the averaged grads back."""
        if self.dp <= 1:
            return
        for p in self.params:  # params whose hook did not reach its count
            if id(p) not in self.ready:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                self._add(p)
        self._launch()
        for work, flat, bucket in self.inflight:
            work.wait()
            flat.div_(self.dp)
            off = 0
            for p in bucket:
                n = p.grad.numel()
                p.grad.copy_(flat[off:off + n].view_as(p.grad))
                off += n
        self.inflight.clear()
        self.active = False


def sync_shared(shared: list[tuple[list[torch.nn.Parameter], Any]], dp: int) -> None:
    """Sum the grads of cross-stage replicas over their group; divide by ``dp``."""
    for params, group in shared:
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            dist.all_reduce(p.grad, group=group)
            if dp > 1:
                p.grad.div_(dp)
