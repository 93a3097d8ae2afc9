"""Sequence parallelism on the node program: the token-split collectives and where they go.

The rules (:mod:`memflow.graph.sp_rules`, run by :func:`memflow.graph.tp_rules.analyse`)
say which values of a node are split by tokens; :func:`insert_seq_ops` puts the
collectives at the borders into the rewritten node module:

- *scatter* (forward: this rank's tokens; backward: the gradients all-gathered):
  a whole input split at the node's entry, or a whole operand an op combines
  with split tokens (a position embedding added to split hidden states);
- *gather* (forward: all-gather; backward: this rank's tokens of the gradient,
  which every rank computed whole and alike): a split value an op needs whole;
- *gather-enter* (forward: all-gather; backward: reduce-scatter, the partial
  input gradients of the column-split linears summed): before the column-split
  linears, in place of tensor parallelism's *enter*. :class:`SPColumns` fuses it
  with the linears that read the gathered value, as Megatron does: they keep
  this rank's tokens for their backward, not the whole, and the backward
  all-gathers them again;
- *reduce-scatter* (forward: reduce-scatter; backward: all-gather): after a
  row-split linear, in place of its all-reduce;
- *partial* (forward: as it is; backward: all-reduce): a whole operand (a
  norm's weight, a bias) of an op on split tokens, whose gradient each rank
  holds for its tokens only.

Each collective records the bytes of the ring all-reduce of equal cost
(an all-gather or reduce-scatter of ``B`` whole bytes moves half of an
all-reduce of ``B``), so the simulator's all-reduce terms price them. On gloo
the reduce-scatter is an all-reduce and a slice (gloo's own reduce-scatter
works on a temporary of its own thread that the byte counter cannot see); on
NCCL it is ``reduce_scatter``. The profiler runs the same ops without a group
(nothing sent), so its counted bytes are the executor's.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.fx

from .gloo import settled

__all__ = ["SPOp", "SPColumns", "PartialGrad", "insert_seq_ops", "chunk_of", "all_gather", "reduce_scatter"]


def _blocks(t: torch.Tensor, a: int, outer: int) -> torch.Tensor:
    sh = list(t.shape)
    return t.reshape(sh[:a] + [outer, sh[a] // outer] + sh[a + 1:])


def chunk_of(t: torch.Tensor, dim: int, outer: int, size: int, rank: int) -> torch.Tensor:
    """Rank ``rank``'s tokens of a whole ``t``: of each of the ``outer`` blocks along ``dim``, its
    ``1/size`` part."""
    a = t.dim() + dim
    sh = list(t.shape)
    sh[a] //= size
    return _blocks(t, a, outer).chunk(size, a + 1)[rank].contiguous().reshape(sh)


def all_gather(group: Any, x: torch.Tensor, dim: int, outer: int, key: tuple) -> torch.Tensor:
    """The whole of a token-split ``x`` (the inverse of :func:`chunk_of` over the group)."""
    a = x.dim() + dim
    xc = x.contiguous()
    group.moved[key] = xc.numel() * xc.element_size() * group.size // 2
    parts = [torch.empty_like(xc) for _ in range(group.size)]
    if group.group is not None and dist.get_backend(group.group) == "nccl":  # pragma: no cover - needs GPUs
        dist.all_gather(parts, xc, group=group.group)
    elif group.group is not None:
        # gloo: each part broadcast in place from its rank. gloo's list-form all_gather flattens the
        # output into a temporary made on this thread (so counted) and freed when its work is released,
        # sometimes after the next ops: one rank in two measured 2·|x| more than predicted at tp 2
        ranks = dist.get_process_group_ranks(group.group)
        for i, p in enumerate(parts):
            if i == group.rank:
                p.copy_(xc)
            with settled(p):
                dist.broadcast(p, src=ranks[i], group=group.group)
    else:  # profiling: the same buffers, nothing sent
        for p in parts:
            p.copy_(xc)
    whole = torch.cat([_blocks(p, a, outer) for p in parts], a + 1)
    sh = list(x.shape)
    sh[a] *= group.size
    return whole.reshape(sh)


def reduce_scatter(group: Any, x: torch.Tensor, dim: int, outer: int, key: tuple) -> torch.Tensor:
    """This rank's tokens of the group's sum of ``x``."""
    group.moved[key] = x.numel() * x.element_size() // 2
    if group.group is not None and dist.get_backend(group.group) == "nccl":  # pragma: no cover - needs GPUs
        pieces = [chunk_of(x, dim, outer, group.size, r) for r in range(group.size)]
        out = torch.empty_like(pieces[group.rank])
        dist.reduce_scatter(out, pieces, group=group.group)
        return out
    y = x.clone(memory_format=torch.contiguous_format)
    if group.group is not None:
        with settled(y):  # (gloo: y dies after chunk_of's copy, not when gloo's worker lets go: :mod:`.gloo`)
            dist.all_reduce(y, group=group.group)
    return chunk_of(y, dim, outer, group.size, group.rank)


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, op):
        ctx.op = op
        return all_gather(op.group, x, op.dim, op.outer, op.key + ("fwd",))

    @staticmethod
    def backward(ctx, g):
        op = ctx.op
        if op.kind == "gather_enter":
            return reduce_scatter(op.group, g, op.dim, op.outer, op.key + ("bwd",)), None
        return chunk_of(g, op.dim, op.outer, op.group.size, op.group.rank), None


class _ToTokens(torch.autograd.Function):
    """Whole to this rank's tokens (``scatter``: a slice; ``reduce_scatter``: the group's sum's);
    backward: the gradients all-gathered."""

    @staticmethod
    def forward(ctx, x, op):
        ctx.op = op
        if op.kind == "scatter":
            return chunk_of(x, op.dim, op.outer, op.group.size, op.group.rank)
        return reduce_scatter(op.group, x, op.dim, op.outer, op.key + ("fwd",))

    @staticmethod
    def backward(ctx, g):
        op = ctx.op
        return all_gather(op.group, g, op.dim, op.outer, op.key + ("bwd",)), None


class PartialGrad(torch.autograd.Function):
    """The identity forward; backward, the gradient summed over the group (``op.group.all_reduce``):
    tensor parallelism's *enter*, and sequence parallelism's *partial*."""

    @staticmethod
    def forward(ctx, x, op):
        ctx.op = op
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        ctx.op.group.all_reduce(g, ctx.op.key + ("bwd",))
        return g, None


class _Columns(torch.autograd.Function):
    """The column-split linears reading one gathered value, keeping only this rank's tokens."""

    @staticmethod
    def forward(ctx, x, op, *params):
        ctx.op = op
        ctx.autocast = torch.is_autocast_enabled(x.device.type)
        ctx.save_for_backward(x, *params)
        whole = all_gather(op.group, x, op.dim, op.outer, op.key + ("fwd",))
        outs, i = [], 0
        for layout, bias in op.specs:
            w = params[i] if layout == "oi" else params[i].t()
            outs.append(torch.nn.functional.linear(whole, w, params[i + 1] if bias else None))
            i += 1 + bias
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        x, *params = ctx.saved_tensors
        op = ctx.op
        with torch.autocast(x.device.type, enabled=ctx.autocast):
            whole = all_gather(op.group, x, op.dim, op.outer, op.key + ("bwd", "again"))
            flat = whole.reshape(-1, whole.shape[-1])
            gx, gps, i = None, [], 0
            for (layout, bias), g in zip(op.specs, grads):
                if g is None:
                    gps += [None] * (1 + bias)
                    i += 1 + bias
                    continue
                g2 = g.reshape(-1, g.shape[-1])
                w = params[i] if layout == "oi" else params[i].t()  # [out, in]
                part = g2 @ w.to(g2.dtype)
                gx = part if gx is None else gx + part
                gw = g2.t() @ flat.to(g2.dtype)
                gps.append(gw if layout == "oi" else gw.t())
                if bias:
                    gps.append(g2.sum(0))
                i += 1 + bias
            shape = whole.shape
            del whole, flat
            if gx is not None:
                gx = reduce_scatter(op.group, gx.reshape(shape), op.dim, op.outer, op.key + ("bwd",))
        gps = [None if gp is None else gp.to(p.dtype) for gp, p in zip(gps, params)]
        return (gx.to(x.dtype) if gx is not None else None, None, *gps)


class SPColumns(torch.nn.Module):
    """Megatron's sequence-parallel column linears: ``x`` (this rank's tokens) all-gathered, each
    linear of ``specs`` ((weight layout ``"oi"``/``"io"``, has bias)) applied to the whole; the
    backward gathers the tokens again and reduce-scatters the input gradient."""

    def __init__(self, group: Any, key: tuple[int, str], dim: int, outer: int, specs: list[tuple[str, bool]]):
        super().__init__()
        self.group, self.key, self.dim, self.outer, self.specs = group, key, dim, outer, list(specs)

    def forward(self, x: torch.Tensor, *params: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return _Columns.apply(x, self, *params)


_FUNCS = {"gather": _Gather, "gather_enter": _Gather, "scatter": _ToTokens, "reduce_scatter": _ToTokens,
          "partial": PartialGrad}


class SPOp(torch.nn.Module):
    """One sequence-parallel collective site of a rewritten node (see the module docstring)."""

    def __init__(self, kind: str, group: Any, key: tuple[int, str], dim: int = -2, outer: int = 1):
        super().__init__()
        self.kind, self.group, self.key, self.dim, self.outer = kind, group, key, dim, outer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _FUNCS[self.kind].apply(x, self)


def insert_seq_ops(graph: torch.fx.Graph, root: torch.nn.Module, env: dict, gm: torch.fx.GraphModule, sp: Any,
                   group: Any, k: int) -> None:
    """Put node ``k``'s token-split collectives (``sp``: its :class:`~memflow.graph.tp_rules.NodeSplit`)
    into ``graph``, the copy of ``gm``'s graph ``env`` maps to."""
    by_name = {n.name: n for n in gm.graph.nodes}
    first_op = next(env[n] for n in gm.graph.nodes if n.op != "placeholder")
    count = [0]

    def site(kind: str, dim: int = -2, outer: int = 1) -> str:
        name = f"sp_{kind}_{count[0]}"
        count[0] += 1
        root.add_module(name, SPOp(kind, group, (k, name), dim, outer))
        return name

    def before_users(value: str, users: tuple[str, ...], kind: str, dim: int = -2, outer: int = 1) -> None:
        v = env[by_name[value]]
        targets = [env[by_name[u]] for u in users]
        order = {n: i for i, n in enumerate(graph.nodes)}
        with graph.inserting_before(min(targets, key=order.__getitem__)):
            new = graph.call_module(site(kind, dim, outer), (v,))
        for t in targets:
            t.replace_input_with(v, new)

    for name, (d, o) in sp.entry.items():
        v = env[by_name[name]]
        users = list(v.users)
        with graph.inserting_before(first_op):
            new = graph.call_module(site("scatter", d, o), (v,))
        for u in users:
            u.replace_input_with(v, new)
        env[by_name[name]] = new  # (what later sites read)
    for name, (d, o, users) in sp.gathers.items():
        before_users(name, tuple(dict.fromkeys(users)), "gather", d, o)
    for (name, d, o), users in sp.scatters.items():
        before_users(name, tuple(dict.fromkeys(users)), "scatter", d, o)
    for name, users in sp.partials.items():
        before_users(name, tuple(dict.fromkeys(users)), "partial")
