"""Point-to-point transfers between neighbouring pipeline stages.

Forward: stage ``s`` sends ``program.values_crossing(hi)`` to ``s + 1``;
backward: the gradients of the floating values that required grad go the
other way. Shapes, dtypes and memory layouts travel once, with the first
forward transfer (an object handshake); gradients have the shapes of the
values they belong to, and their memory orders travel once, with the first
backward transfer: a gradient laid out as a permutation (a transposed view's) is
sent as its memory, without a copy. Sends are non-blocking (``isend``),
receives block.

A value arrives in the layout it had where it was made: a dense tensor whose
strides are a permutation of a contiguous layout (a transposed view, such as a
batch-first RNN's output) is sent as its memory in memory order and received
into a tensor of the same strides, so the receiving stage's program sees what
the profiled program saw (received contiguous, a GRU's input was copied by the
GRU: memory the profile never saw). A view that overlaps itself (a broadcast made
by ``expand``: stride 0, larger than its memory, such as an attention mask over
heads) is sent as its storage and received as the same view of a storage of that
size, so neither stage holds the broadcast's full size (the profiled program
held its storage: DistilBERT's first stage was 496 bytes, a 512-byte copy of a
16-byte mask per in-flight micro-batch, above its prediction). Other views (of
part of a storage) are sent contiguous: only their own bytes, a copy the plan
counts (the rule is :mod:`memflow.graph.sending`'s).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ..errors import ExecutionError
from ..graph.sending import aliases, broadcast_storage, memory_order

__all__ = ["StageLink", "ValueMeta"]

FWD_TAG, BWD_TAG = 1000, 2000


class ValueMeta:
    """Shape, dtype, requires-grad and memory layout of one crossing value (None: not a tensor).
    ``strides``/``perm``: the layout to receive it in (None: contiguous)."""

    __slots__ = ("shape", "dtype", "requires_grad", "obj", "strides", "perm", "overlap")

    def __init__(self, v: Any):
        self.strides = self.perm = self.overlap = None
        if isinstance(v, torch.Tensor):
            self.shape = tuple(v.shape)
            self.dtype = v.dtype
            self.requires_grad = bool(v.requires_grad and v.is_floating_point())
            self.obj = None
            perm = memory_order(v) if not v.is_contiguous() else None
            if perm is not None:
                self.strides, self.perm = tuple(v.stride()), perm
            elif not self.requires_grad and not v.is_contiguous():
                numel = broadcast_storage(v)
                if numel is not None:  # a broadcast: sent as its storage, received as the same view
                    self.strides, self.overlap = tuple(v.stride()), (numel, int(v.storage_offset()))
        else:
            self.shape = None
            self.dtype = None
            self.requires_grad = False
            self.obj = v

    def __getstate__(self):
        return (self.shape, str(self.dtype).replace("torch.", "") if self.dtype else None, self.requires_grad, self.obj,
                self.strides, self.perm, self.overlap)

    def __setstate__(self, st):
        shape, dt, rg, obj, strides, perm, overlap = st
        self.overlap = overlap
        self.shape = shape
        self.dtype = getattr(torch, dt) if dt else None
        self.requires_grad = rg
        self.obj = obj
        self.strides, self.perm = strides, perm


class StageLink:
    """Sends to / receives from one neighbouring rank a fixed list of named values."""

    def __init__(self, peer: int, names: list[str], device: torch.device, group=None):
        self.peer = peer
        self.names = names
        self.device = device
        self.group = group
        self.meta: list[ValueMeta] | None = None
        self.pending: list[tuple[Any, torch.Tensor]] = []
        self.sent_fwd: list[list[tuple[Any, torch.Tensor]]] = []  # per micro-batch, oldest first
        # per gradient sent back, its memory order (None: contiguous), told once by its first backward: it
        # travels as its memory, no copy, and is received in that layout
        self.grad_perms: list | None = None
        # per value (forward) and per gradient (backward), the index of an earlier one that is the same tensor
        # (None: its own), told once with the layouts: it travels once and arrives as that one
        self.fwd_alias: list | None = None
        self.grad_alias: list | None = None
        self.grad_none: list = []  # per gradient: none made (see send_grads)

    # ------------------------------------------------------------ helpers
    def _isend(self, t: torch.Tensor, tag: int, into: list | None = None, perm: tuple | None = None,
               overlap: tuple | None = None) -> None:
        t = t.detach()
        if overlap is not None:  # a broadcast: its storage, as one flat tensor
            t = t.new_empty(0).set_(t.untyped_storage(), 0, (overlap[0],), (1,))
        elif perm is not None:  # in the order the receiver lays it out (no copy where it is laid out so)
            t = t.permute(perm)
        if not t.is_contiguous():
            t = t.contiguous()
        work = dist.isend(t, dst=self.peer, group=self.group, tag=tag)
        (self.pending if into is None else into).append((work, t))

    def release_oldest_forward(self) -> None:
        """Our oldest in-flight micro-batch's backward is next: complete the sends of its
        activations and drop their buffers before its gradients are received (gloo reports a
        send complete only once it is waited on). It cannot deadlock: the peer receives those
        activations for its own forward, before it sends their gradients, and waits on nothing
        else from this rank to do so."""
        if self.sent_fwd:
            for w, _ in self.sent_fwd.pop(0):
                w.wait()

    def _recv(self, shape, dtype, tag: int, meta: ValueMeta | None = None) -> torch.Tensor:
        if meta is not None and meta.overlap is not None:  # a broadcast: its storage, viewed as it was sent
            flat = torch.empty(meta.overlap[0], dtype=dtype, device=self.device)
            dist.irecv(flat, src=self.peer, group=self.group, tag=tag).wait()
            return flat.as_strided(shape, meta.strides, meta.overlap[1])
        if meta is not None and meta.perm is not None:  # in the layout it was made in
            t = torch.empty_strided(shape, meta.strides, dtype=dtype, device=self.device)
            dist.irecv(t.permute(meta.perm), src=self.peer, group=self.group, tag=tag).wait()
            return t
        t = torch.empty(shape, dtype=dtype, device=self.device)
        dist.irecv(t, src=self.peer, group=self.group, tag=tag).wait()
        return t

    def poll(self) -> None:
        """Forget sends that have completed (their buffers may be freed)."""
        self.pending = [(w, t) for w, t in self.pending if not w.is_completed()]

    def wait_pending(self) -> None:
        """Complete the gradient sends of the previous backward and drop their buffers. Called
        before the next pass allocates anything, so a sent gradient lives no longer than its
        backward (gloo reports a send complete only once waited on). It cannot deadlock: the
        peer posts that receive without waiting for anything more from this rank."""
        for w, _ in self.pending:
            w.wait()
        self.pending.clear()

    def wait_all(self) -> None:
        for w, _ in self.pending + [x for mb in self.sent_fwd for x in mb]:
            w.wait()
        self.pending.clear()
        self.sent_fwd.clear()

    # ------------------------------------------------------------ forward
    def send_values(self, env: dict[str, Any]) -> None:
        vals = [env[n] for n in self.names]
        if self.meta is None:
            self.meta = [ValueMeta(v) for v in vals]
            self.fwd_alias = aliases(vals)
            dist.send_object_list([(self.meta, self.fwd_alias)], dst=self.peer, group=self.group)
        else:
            _same_aliases(self.fwd_alias, vals, "value")
        sent: list[tuple[Any, torch.Tensor]] = []
        for i, (v, m) in enumerate(zip(vals, self.meta)):
            if m.shape is not None and self.fwd_alias[i] is None:
                self._isend(v, FWD_TAG + i, into=sent, perm=m.perm, overlap=m.overlap)
        self.sent_fwd.append(sent)
        self.poll()

    def recv_values(self) -> dict[str, Any]:
        if self.meta is None:
            box: list[Any] = [None]
            dist.recv_object_list(box, src=self.peer, group=self.group)
            self.meta, self.fwd_alias = box[0]
        out: dict[str, Any] = {}
        for i, (n, m) in enumerate(zip(self.names, self.meta)):
            if m.shape is None:
                out[n] = m.obj
                continue
            if self.fwd_alias[i] is not None:  # the same tensor as an earlier value: received once
                out[n] = out[self.names[self.fwd_alias[i]]]
                continue
            t = self._recv(m.shape, m.dtype, FWD_TAG + i, m)
            if m.requires_grad:
                t.requires_grad_(True)
            out[n] = t
        return out

    # ----------------------------------------------------------- backward
    def grad_names(self) -> list[tuple[int, str, ValueMeta]]:
        assert self.meta is not None, "backward before the first forward transfer"
        return [(i, n, m) for i, (n, m) in enumerate(zip(self.names, self.meta)) if m.requires_grad]

    def send_grads(self, grads: dict[str, torch.Tensor]) -> None:
        out = [(i, grads.pop(n, None)) for i, n, _ in self.grad_names()]
        if self.grad_perms is None:  # the first backward: each gradient's memory order, once (the same every step)
            # a value the loss does not depend on (an unread branch: CANINE's upsampling, whose output the
            # pooled classifier never reads) has no gradient: none travels and the receiver backpropagates
            # without one, as the whole step does (a zero-filled one sent instead was an 8 KiB buffer the
            # receiving stage held through its backward, under its plan)
            self.grad_none = [g is None for _, g in out]
            self.grad_perms = [memory_order(g) if g is not None and not g.is_contiguous() else None for _, g in out]
            self.grad_alias = aliases([g for _, g in out], views=True)
            dist.send_object_list([(self.grad_perms, self.grad_alias, self.grad_none)], dst=self.peer,
                                  group=self.group)
        else:
            for (i, g), none in zip(out, self.grad_none):
                if g is not None and none:
                    raise ExecutionError(f"the pipeline value {self.names[i]!r} got a gradient at this micro-batch "
                                         "and none at the first; the step was stopped: the receiving stage posts "
                                         "receives for the first backward's gradients only (make the loss depend "
                                         "on it every step, or on none)")
            out = [(i, torch.zeros(self.meta[i].shape, dtype=self.meta[i].dtype, device=self.device)
                    if g is None and not none else g) for (i, g), none in zip(out, self.grad_none)]
            _same_aliases(self.grad_alias, [g for _, g in out], "gradient", views=True)
        for (i, g), perm, alias in zip(out, self.grad_perms, self.grad_alias):
            if alias is None and g is not None:  # (an alias travelled as the earlier gradient it is)
                self._isend(g, BWD_TAG + i, perm=perm)  # (another layout than the first's: sent as a copy)
        out.clear()
        self.poll()

    def recv_grads(self) -> dict[str, torch.Tensor]:
        if self.grad_perms is None:
            box: list[Any] = [None]
            dist.recv_object_list(box, src=self.peer, group=self.group)
            self.grad_perms, self.grad_alias, self.grad_none = box[0]
        out = {}
        names = self.grad_names()
        for (i, n, m), perm, alias, none in zip(names, self.grad_perms, self.grad_alias, self.grad_none):
            if none:  # (no gradient: the sender's backward made none)
                continue
            if isinstance(alias, list):  # the same elements as an earlier gradient, in its own layout
                base = out[names[alias[0]][1]]
                out[n] = base.as_strided(m.shape, alias[1], base.storage_offset())
                continue
            if alias is not None:  # the same tensor as an earlier gradient: received once
                out[n] = out[names[alias][1]]
                continue
            if perm is None:
                out[n] = self._recv(m.shape, m.dtype, BWD_TAG + i)
                continue
            # received in the sender's memory order (a transposed view's gradient, as Swin's pooler's: a
            # contiguous copy beside it at the send was 5,816 bytes, 35% of a small stage, above its plan)
            t = torch.empty_permuted(m.shape, perm, dtype=m.dtype, device=self.device)
            dist.irecv(t.permute(perm), src=self.peer, group=self.group, tag=BWD_TAG + i).wait()
            out[n] = t
        return out


def _same_aliases(told: list, values: list, what: str, views: bool = False) -> None:
    """The aliases told at the first transfer must hold at every one (the receiver posts one receive per
    tensor told): a step whose values alias otherwise is stopped with what changed."""
    now = aliases(values, views)
    if now != told:
        raise ExecutionError(f"a pipeline stage's {what}s that cross its cut alias each other differently from "
                             f"the first micro-batch's ({told} then {now}); the step was stopped: its transfers "
                             "are set up once, from the first micro-batch")
