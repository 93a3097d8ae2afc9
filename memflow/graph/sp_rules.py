"""Sequence parallelism's rules: which ops a token-split value passes through, found on the graph.

Megatron's sequence parallelism (Korthikanti et al., 2022) splits the ops that
tensor parallelism leaves replicated (norms, dropout, residual adds: every op
outside the column/row pairs) along the tokens: each rank of the group holds
``1/tp`` of the sequence there, and the borders with the column-split regions
become collectives of the same volume as the all-reduces they replace (an
all-gather before the column-split linears, whose backward is a
reduce-scatter; a reduce-scatter after the row-split linears, whose backward
is an all-gather).

On a node's graph the state of a value is :class:`Seq`: split along ``dim``
(counted from the end), which is made of ``outer`` equal blocks each split
alone (``[b, s/tp, h]`` viewed as ``[b·s/tp, h]`` is split along dim -2 in
``b`` blocks). :func:`seq_op` says what an op makes of its token-split inputs:
a token-split result (an op that acts on each token alone: elementwise ops,
norms and reductions over the features, views that keep the split dimension
or merge/cut it with the dimensions before it, transposes, softmaxes over
other dimensions) or None: the op needs its inputs whole and the caller
all-gathers them first. Which dimension is the sequence is not guessed from
names: any dimension every op treats token by token will do, the rules check
it; the caller starts from the features' neighbour (``-2``: ``[b, s, h]``'s
``s``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.fx

__all__ = ["Seq", "seq_op", "seq_view", "moved_dim"]

aten = torch.ops.aten

REDUCTIONS = {aten.mean, aten.sum, aten.amax, aten.amin, aten.var, aten.std}
NORMS = {aten.layer_norm, aten.native_layer_norm}


@dataclass(frozen=True)
class Seq:
    dim: int  # negative: counted from the end
    outer: int  # equal blocks along dim, each split alone
    origins: frozenset  # "in:<placeholder>" (split at the node's entry), "rs:<row linear>", "arr:<placeholder>"


def seq_view(st: Seq, ish: tuple[int, ...], osh: tuple[int, ...], groups: list, tp: int) -> Seq | None:
    """A view's token-split result (None: the view moves the split). The split dimension may merge
    with the dimensions before it (they become blocks) or be cut into (blocks, tokens); the
    dimensions after it in its group must be of size 1."""
    a = len(ish) + st.dim
    for gi, gj in groups:
        if a not in gi:
            continue
        if any(ish[i] != 1 for i in gi if i > a):
            return None
        big_j = [j for j in gj if osh[j] != 1]
        if not big_j:
            return None
        j = big_j[-1]
        t = ish[a] // st.outer  # tokens per block, globally
        pre_i = math.prod(ish[i] for i in gi if i < a) * st.outer
        pre_j = math.prod(osh[k] for k in gj if k < j)
        if osh[j] % t or pre_i % pre_j or (osh[j] // t) * pre_j != pre_i or t % tp:
            return None
        return Seq(j - len(osh), osh[j] // t, st.origins)
    return None


def moved_dim(node: torch.fx.Node, pk: Any, a: int, ish: tuple, osh: tuple) -> int | None:
    """Where dimension ``a`` of a transpose/permute/expand/unsqueeze/squeeze/slice/select's input is
    in its output (None: the op indexes it, or expands it)."""
    r, ro = len(ish), len(osh)
    if pk is aten.transpose:
        d0, d1 = node.args[1] % r, node.args[2] % r
        return d1 if a == d0 else d0 if a == d1 else a
    if pk is aten.permute:
        return [d % r for d in node.args[1]].index(a)
    if pk is aten.expand:
        b = a + (ro - r)
        return b if osh[b] == ish[a] else None
    if pk is aten.unsqueeze:
        d = node.args[1] % ro
        return a + 1 if d <= a else a
    if pk is aten.squeeze:
        dims = node.args[1] if len(node.args) > 1 else [i for i in range(r) if ish[i] == 1]
        dims = [dims] if isinstance(dims, int) else dims
        dims = [d % r for d in dims if ish[d % r] == 1]
        return a - sum(1 for d in dims if d < a)
    d = node.args[1] % r if len(node.args) > 1 else 0  # slice, select
    if d == a:
        return None
    return a - 1 if pk is aten.select and d < a else a


def _dims(node: torch.fx.Node, pk: Any, st: Seq, ish: tuple, osh: tuple) -> Seq | None:
    b = moved_dim(node, pk, len(ish) + st.dim, ish, osh)
    return None if b is None else Seq(b - len(osh), st.outer, st.origins)


def _reduced(node: torch.fx.Node, st: Seq, ish: tuple, osh: tuple) -> Seq | None:
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if dims is None:
        return None  # over everything
    dims = [dims] if isinstance(dims, int) else list(dims)
    r, a = len(ish), len(ish) + st.dim
    dims = [d % r for d in dims]
    if not dims or a in dims:
        return None
    keep = len(osh) == r
    b = a if keep else a - sum(1 for d in dims if d < a)
    return Seq(b - len(osh), st.outer, st.origins)


def seq_op(node: torch.fx.Node, pk: Any, state: Callable[[Any], Any], shape: Callable[[Any], Any],
           views: set, dims_ops: set, softmax: set, splits: set, elementwise: set, groups: Callable,
           tp: int) -> tuple[Any, list, list]:
    """What ``node`` makes of its token-split inputs: (its state: a :class:`Seq`, a list of them for a
    split op, or None when it needs them whole; the whole inputs to split alike before it (they vary
    along the split dimension); the whole floating inputs it combines with split values along a
    dimension of size 1 (their gradient is a partial sum over the group's tokens))."""
    ins = node.all_input_nodes
    seqs = [state(a) for a in ins if isinstance(state(a), Seq)]
    if len({(s.dim, s.outer) for s in seqs}) != 1 or any(state(a) is not None and not isinstance(state(a), Seq)
                                                          for a in ins):
        return None, [], []
    st = Seq(seqs[0].dim, seqs[0].outer, frozenset().union(*(s.origins for s in seqs)))
    x = node.args[0] if node.args else None
    ish = shape(x) if isinstance(x, torch.fx.Node) else None
    osh = shape(node)
    if pk in elementwise or pk in NORMS:
        scatter, partial = [], []
        if pk in NORMS:
            k = len(node.args[1])
            if not isinstance(state(x), Seq) or -st.dim <= k:
                return None, [], []
        if osh is None:
            return None, [], []
        for a in ins:
            if state(a) is not None:
                continue
            sh = shape(a)
            v = a.meta.get("val")
            if sh is None or not isinstance(v, torch.Tensor):
                continue
            if len(sh) >= -st.dim and sh[st.dim] != 1:
                if sh[st.dim] != osh[st.dim]:
                    return None, [], []
                scatter.append(a)
            elif v.is_floating_point():
                partial.append(a)
        if pk is aten.native_layer_norm:
            return [st, st, st], scatter, partial
        return st, scatter, partial
    if pk is aten.cat:
        ts = node.args[0]
        d = (node.args[1] if len(node.args) > 1 else 0)
        if osh is None or any(not isinstance(state(t), Seq) for t in ts) or d % len(osh) == len(osh) + st.dim:
            return None, [], []
        return st, [], []
    if ish is None or not isinstance(state(x), Seq):
        return None, [], []
    if pk in views:
        return (seq_view(st, ish, osh, groups(ish, osh), tp) if osh is not None else None), [], []
    if pk in dims_ops:
        return (_dims(node, pk, st, ish, osh) if osh is not None else None), [], []
    if pk in softmax:
        d = node.args[1] % len(ish)
        return (st if d != len(ish) + st.dim else None), [], []
    if pk in REDUCTIONS:
        return (_reduced(node, st, ish, osh) if osh is not None else None), [], []
    if pk in splits:
        d = (node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)) % len(ish)
        vals = node.meta.get("val")
        if d == len(ish) + st.dim or not isinstance(vals, (list, tuple)):
            return None, [], []
        return [st] * len(vals), [], []
    return None, [], []
