"""Tensor parallelism on the node program: each rank's share of every split node.

:func:`apply_tp` takes a captured :class:`~memflow.graph.program.StepProgram`
and makes it one tensor-parallel rank's program: every node whose graph has
Megatron pairs (:mod:`memflow.graph.tp_rules`) gets a rewritten module, and
the parameters those pairs read are replaced by this rank's slices. The
profiler traces that program (rank 0's, with no group: the collectives are
counted, not run) and the executor runs it (each rank its own, the collectives
on the tensor-parallel process group), so both see the same ops.

The rewrite adds Megatron's two operators around a split region: *enter*
(forward: the replicated input as it is; backward: the input gradients'
partial sums all-reduced) before the column-split linears' input, and
*reduce* (forward: the row-split linear's partial output all-reduced;
backward: the gradient as it is) after each row-split linear, whose bias is
then added once. The reduce works on a copy of the partial output: a
selective or recomputed node may have saved the matmul's output, which an
in-place collective would change. Shape arguments that name the split
dimension's full size (a view to ``[b, s, 3·h]``, a split of the fused QKV
into ``h``-sized pieces) are divided by the group size; ``-1`` sizes need
nothing.

Why our own collectives and not DTensor: the node programs are aten graphs
run by the profiler under a dispatch-mode byte counter and by the executor
under checkpoint and saved-tensor hooks; plain tensors with two explicit
autograd functions keep every byte visible to that counter and every
collective at a place the simulator prices. DTensor's sharding propagation is
what :mod:`~memflow.graph.tp_rules` does for the small set of ops transformer
blocks use.
"""
from __future__ import annotations

import contextlib
import operator
from typing import Any

import weakref

import torch
import torch.distributed as dist
import torch.fx

from .gloo import settled
from .program import StepProgram
from .sp import PartialGrad, SPColumns, SPOp, insert_seq_ops
from .tp_rules import SPLITS, VIEWS, NodeSplit, analyse, weight_of

__all__ = ["TPGroup", "apply_tp", "record_tp", "uses_sequence", "shard", "origin_of", "REPLICATED", "MEGATRON", "MEGATRON_SP",
           "SEQUENCE"]

REPLICATED = "replicated"
MEGATRON = "megatron"  # column- and row-split linear pairs, the ops between them split by heads/features
MEGATRON_SP = "megatron+sp"  # ... and the ops outside them split by tokens (sequence parallelism)
SEQUENCE = "sequence"  # no linear split; the ops split by tokens

aten = torch.ops.aten

# a rank's slice -> the whole parameter it was cut from (the model holds that one: its place in the
# model's parameter order is the slice's, as a training script's optimizer would get them)
# (by id, both weakly: a slice must not keep its whole parameter alive)
_ORIGIN: dict[int, tuple[weakref.ref, weakref.ref]] = {}


def _forget(ref: weakref.ref) -> None:
    for k, (r, _) in list(_ORIGIN.items()):
        if r is ref:
            del _ORIGIN[k]


def origin_of(p: torch.Tensor) -> torch.Tensor:
    """The whole parameter ``p`` is a tensor-parallel slice of (while it lives), or ``p``."""
    got = _ORIGIN.get(id(p))
    if got is None or got[0]() is not p:
        return p
    full = got[1]()
    return p if full is None else full


class TPGroup:
    """A tensor-parallel group as the program's collectives see it: ``size`` ranks, this one
    ``rank``; ``group`` the process group (None while profiling: nothing is sent). Records the bytes
    each collective moved, by (node, site, "fwd"|"bwd"), the last time it ran."""

    def __init__(self, size: int, rank: int = 0, group: Any = None):
        self.size, self.rank, self.group = size, rank, group
        self.moved: dict[tuple[int, str, str], int] = {}

    def all_reduce(self, t: torch.Tensor, key: tuple, op: Any = None) -> None:
        """Sum (or ``op``) ``t`` over the group, in place."""
        self.moved[key] = t.numel() * t.element_size()
        if self.group is not None:
            with settled(t) if dist.get_backend(self.group) == "gloo" else contextlib.nullcontext():
                dist.all_reduce(t, op=op or dist.ReduceOp.SUM, group=self.group)

    def node_bytes(self, k: int) -> tuple[int, int, int, int]:
        """(forward bytes, forward collectives, backward bytes, backward collectives) of node ``k``."""
        f = [b for (n, _, d, *_), b in self.moved.items() if n == k and d == "fwd"]
        g = [b for (n, _, d, *_), b in self.moved.items() if n == k and d == "bwd"]
        return sum(f), len(f), sum(g), len(g)


class _Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, op):
        y = x.clone(memory_format=torch.contiguous_format)
        op.group.all_reduce(y, op.key + ("fwd",))
        return y

    @staticmethod
    def backward(ctx, g):
        return g, None


class TPOp(torch.nn.Module):
    """One collective site of a rewritten node: ``enter`` or ``reduce``."""

    def __init__(self, kind: str, group: TPGroup, key: tuple[int, str]):
        super().__init__()
        self.kind, self.group, self.key = kind, group, key

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (PartialGrad if self.kind == "enter" else _Reduce).apply(x, self)


class _VocabCrossEntropy(torch.autograd.Function):
    """Megatron's vocabulary-parallel cross-entropy: ``logits`` [N, V/tp] are this rank's classes
    ``[start, start + V/tp)``; the log-sum-exp and the target logits come from the group (a max and
    two sums: one all-reduce each). Saves this rank's softmax, as the whole loss saves its log-softmax."""

    @staticmethod
    def forward(ctx, logits, target, op):
        g = op.group
        x = logits.float()
        n, v = x.shape
        start = g.rank * v
        lmax = x.max(-1).values
        g.all_reduce(lmax, op.key + ("fwd", "max"), dist.ReduceOp.MAX)
        x = x - lmax.unsqueeze(-1)
        local = target - start
        outside = (local < 0) | (local >= v)
        local = local.masked_fill(outside, 0)
        picked = x.gather(1, local.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        g.all_reduce(picked, op.key + ("fwd", "target"))
        x = x.exp_()
        total = x.sum(-1)
        g.all_reduce(total, op.key + ("fwd", "sum"))
        valid = target != op.ignore_index
        losses = (total.log() - picked).masked_fill(~valid, 0.0)
        count = valid.sum() if op.reduction == 1 else torch.ones((), dtype=torch.long, device=target.device)
        loss = losses.sum() / count.clamp(min=1) if op.reduction == 1 else losses.sum()
        x.div_(total.unsqueeze(-1))  # (this rank's share of the softmax)
        ctx.save_for_backward(x, local, outside, valid, count)
        ctx.dtype = logits.dtype
        return loss.to(logits.dtype) if logits.dtype != torch.float32 else loss

    @staticmethod
    def backward(ctx, grad):
        soft, local, outside, valid, count = ctx.saved_tensors
        g = soft.clone()
        rows = torch.arange(g.shape[0], device=g.device)
        g[rows, local] -= (~outside).to(g.dtype)
        scale = (valid.to(g.dtype) * (grad.float() / count.clamp(min=1).to(g.dtype))).unsqueeze(-1)
        g.mul_(scale)
        return g.to(ctx.dtype), None, None


class TPCrossEntropy(torch.nn.Module):
    """A rewritten node's loss over vocabulary-split logits (``reduction`` 1: mean, 2: sum)."""

    def __init__(self, group: TPGroup, key: tuple[int, str], reduction: int, ignore_index: int):
        super().__init__()
        self.group, self.key, self.reduction, self.ignore_index = group, key, reduction, ignore_index

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return _VocabCrossEntropy.apply(logits, target, self)


def shard(t: torch.Tensor, dim: int, blocks: int, size: int, rank: int) -> torch.Tensor:
    """This rank's slice of ``t`` along ``dim``: of each of its ``blocks`` equal blocks, the
    ``rank``-th of ``size`` equal pieces (a fused QKV weight: this rank's heads of q, k and v)."""
    parts = [b.chunk(size, dim)[rank] for b in t.chunk(blocks, dim)]
    return (parts[0] if len(parts) == 1 else torch.cat(parts, dim)).contiguous()


def _div(v: Any, tp: int) -> Any:
    return v // tp if isinstance(v, int) and v > 0 else v


def _out_dim(sp: NodeSplit, node: torch.fx.Node) -> int | None:
    st = sp.states.get(node.name)
    v = node.meta.get("val")
    if st is None or not isinstance(v, torch.Tensor):
        return None
    return v.dim() + st.dim


def rewrite(gm: torch.fx.GraphModule, sp: NodeSplit, group: TPGroup, k: int) -> torch.fx.GraphModule:
    """Node ``k``'s module as one rank of ``group`` runs it (see the module docstring)."""
    tp = group.size
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    out = graph.graph_copy(gm.graph, env)
    graph.output(out)
    root = torch.nn.Module()
    for name, mod in gm.named_children():
        root.add_module(name, mod)
    params = set(sp.shards)
    placeholders = {n.name for n in gm.graph.nodes if n.op == "placeholder"}
    # -- shape arguments naming the split dimension's full size
    for old in gm.graph.nodes:
        pk = getattr(old.target, "overloadpacket", None) if old.op == "call_function" else None
        if old.op == "output":
            continue
        new = env[old]
        if pk in VIEWS or pk is aten.expand:
            b = _out_dim(sp, old)
            if b is not None and old.args[0].name in sp.states:
                shape = list(new.args[1])
                shape[b] = _div(shape[b], tp)
                new.args = (new.args[0], shape) + tuple(new.args[2:])
        elif pk in SPLITS and old.args[0].name in sp.states and pk is not aten.chunk:
            x = old.args[0].meta["val"]
            d = (old.args[2] if len(old.args) > 2 else old.kwargs.get("dim", 0)) % x.dim()
            if d == x.dim() + sp.states[old.args[0].name].dim:
                size = new.args[1]
                size = [_div(s, tp) for s in size] if isinstance(size, (list, tuple)) else _div(size, tp)
                new.args = (new.args[0], size) + tuple(new.args[2:])
    # -- sequence parallelism's scatters, gathers and partial-gradient sites
    insert_seq_ops(graph, root, env, gm, sp, group, k)
    by_name = {n.name: n for n in gm.graph.nodes}
    # -- token-split inputs of column-split linears: gathered for them, fused with them
    _fuse_columns(graph, root, env, by_name, sp, params | placeholders, group, k)
    # -- enter before the column-split linears' input (one per input value)
    entered: dict[str, torch.fx.Node] = {}
    for name in sp.columns:
        old = by_name[name]
        x = weight_of(old, params | placeholders)[0]
        if x.name in sp.enter_gathers:
            continue
        if x.name not in entered:
            site = f"tp_enter_{len(entered)}"
            root.add_module(site, TPOp("enter", group, (k, site)))
            with graph.inserting_after(env[x]):
                entered[x.name] = graph.call_module(site, (env[x],))
        new = env[old]
        new.args = tuple(entered[x.name] if a is env[x] else a for a in new.args)
    # -- reduce after the row-split linears, their bias added after it
    for i, name in enumerate(sp.rows):
        old = by_name[name]
        new = env[old]
        x, weight, _, bias = weight_of(old, params | placeholders)
        pk = old.target.overloadpacket
        site = f"tp_reduce_{i}"
        if name in sp.rs:  # summed and split by tokens
            d, o = sp.rs[name]
            root.add_module(site, SPOp("reduce_scatter", group, (k, site), d, o))
        else:
            root.add_module(site, TPOp("reduce", group, (k, site)))
        with graph.inserting_after(new):
            if pk is aten.linear:
                mm = graph.call_function(aten.linear.default, (new.args[0], new.args[1]))
            elif pk is aten.addmm:
                mm = graph.call_function(aten.mm.default, (new.args[1], new.args[2]))
            else:
                mm = graph.call_function(old.target, tuple(new.args), dict(new.kwargs))
            mm.meta = dict(new.meta)
        with graph.inserting_after(mm):
            red = graph.call_module(site, (mm,))
        last = red
        if bias is not None:
            b = env[by_name[bias]]
            with graph.inserting_after(red):
                if name in sp.rs:  # added to split tokens: its gradient summed over the group
                    root.add_module(f"{site}_bias", SPOp("partial", group, (k, f"{site}_bias")))
                    b = graph.call_module(f"{site}_bias", (b,))
                    with graph.inserting_after(b):
                        last = graph.call_function(aten.add.Tensor, (red, b))
                else:
                    last = graph.call_function(aten.add.Tensor, (red, b))
        new.replace_all_uses_with(last)
        graph.erase_node(new)
    # -- losses over vocabulary-split logits
    for i, name in enumerate(sp.losses):
        old = by_name[name]
        new = env[old]
        args = list(old.args) + [None, 1, -100, 0.0][len(old.args) - 2:]
        reduction = old.kwargs.get("reduction", args[3])
        ignore = old.kwargs.get("ignore_index", args[4])
        site = f"tp_loss_{i}"
        root.add_module(site, TPCrossEntropy(group, (k, site), int(reduction), int(ignore)))
        with graph.inserting_after(new):
            loss = graph.call_module(site, (new.args[0], new.args[1]))
        loss.meta = dict(new.meta)
        new.replace_all_uses_with(loss)
        graph.erase_node(new)
    # -- lookups in vocabulary-split tables: each rank looks up the ids in its rows, the group sums
    for i, name in enumerate(sp.embeddings):
        old = by_name[name]
        new = env[old]
        rows = old.args[0].meta["val"].shape[0] // tp
        start = group.rank * rows
        pad = old.args[2] if len(old.args) > 2 else -1
        pad = pad - start if isinstance(pad, int) and start <= pad < start + rows else -1
        site = f"tp_reduce_embedding_{i}"
        root.add_module(site, TPOp("reduce", group, (k, site)))
        w, ids = new.args[0], new.args[1]
        with graph.inserting_before(new):
            local = graph.call_function(aten.sub.Tensor, (ids, start))
            low = graph.call_function(aten.lt.Scalar, (local, 0))
            high = graph.call_function(aten.ge.Scalar, (local, rows))
            outside = graph.call_function(aten.bitwise_or.Tensor, (low, high))
            local = graph.call_function(aten.masked_fill.Scalar, (local, outside, 0))
            got = graph.call_function(aten.embedding.default, (w, local, pad))
            mask = graph.call_function(aten.unsqueeze.default, (outside, -1))
            got = graph.call_function(aten.masked_fill.Scalar, (got, mask, 0.0))
            red = graph.call_module(site, (got,))
        new.replace_all_uses_with(red)
        graph.erase_node(new)
    graph.lint()
    return torch.fx.GraphModule(root, graph, class_name=type(gm).__name__)


def _fuse_columns(graph: torch.fx.Graph, root: torch.nn.Module, env: dict, by_name: dict, sp: NodeSplit,
                  names: set[str], group: TPGroup, k: int) -> None:
    """Each token-split value the column-split linears read: one :class:`~memflow.graph.sp.SPColumns`
    call in place of them (its outputs theirs, in order)."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    for j, (xname, (d, o)) in enumerate(sp.enter_gathers.items()):
        cols = [c for c in sp.columns if weight_of(by_name[c], names)[0].name == xname]
        specs, args, dead = [], [env[by_name[xname]]], []
        for c in cols:
            _, w, layout, b = weight_of(by_name[c], names)
            specs.append((layout, b is not None))
            args.append(env[by_name[w]])
            if b is not None:
                args.append(env[by_name[b]])
            dead += [a for a in env[by_name[c]].all_input_nodes if a.op == "call_function"
                     and getattr(a.target, "overloadpacket", None) in (aten.t, aten.transpose)]
        site = f"sp_columns_{j}"
        root.add_module(site, SPColumns(group, (k, site), d, o, specs))
        first = min((env[by_name[c]] for c in cols), key=order.__getitem__)
        with graph.inserting_before(first):
            call = graph.call_module(site, tuple(args))
            outs = [graph.call_function(operator.getitem, (call, i)) for i in range(len(cols))]
        for c, out in zip(cols, outs):
            new = env[by_name[c]]
            out.meta = dict(new.meta)
            new.replace_all_uses_with(out)
            graph.erase_node(new)
        for t in dead:
            if not t.users:
                graph.erase_node(t)


def _trainable(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.requires_grad


def _set_attr(program: StepProgram, name: str, value: torch.Tensor) -> None:
    *path, last = program.attrs[name].split(".")
    obj: Any = program.split
    for part in path:
        obj = getattr(obj, part)
    setattr(obj, last, value)


def apply_tp(program: StepProgram, group: TPGroup, sequence: bool = True) -> list[str]:
    """Make ``program`` rank ``group.rank``'s of a ``group.size``-way tensor-parallel group, in place;
    returns each node's partitioning (:data:`MEGATRON`, :data:`MEGATRON_SP`, :data:`SEQUENCE` or
    :data:`REPLICATED`). With ``sequence``, the ops outside the column/row pairs are split by tokens
    where the rules allow (:mod:`memflow.graph.sp_rules`); the nodes are analysed in order, each
    knowing which of its inputs arrive token-split."""
    tp = group.size
    if tp == 1:
        return [REPLICATED] * program.n
    readers: dict[str, int] = {}
    for c in program.calls:
        for a in c.arg_names:
            if a in program.attrs:
                readers[a] = readers.get(a, 0) + 1

    def node_params(c: Any) -> tuple[dict[str, str], set[str]]:
        phs = [n for n in c.module.graph.nodes if n.op == "placeholder"]
        arg_of = {ph.name: a for ph, a in zip(phs, c.arg_names)}
        return arg_of, {ph for ph, a in arg_of.items()
                        if a in program.attrs and readers[a] == 1 and _trainable(program.attr_value(a))}

    def divisible(sp: NodeSplit, arg_of: dict[str, str]) -> bool:
        return all(program.attr_value(arg_of[ph]).shape[dim] % (blocks * tp) == 0
                   for ph, (dim, blocks) in sp.shards.items())

    plain = []
    for c in program.calls:
        arg_of, params = node_params(c)
        sp = analyse(c.module, params, tp)
        plain.append(sp if sp.split and divisible(sp, arg_of) else None)
    if not any(plain):  # nothing to split: no tokens either (an LSTM's group would only repeat it)
        return [REPLICATED] * program.n
    layouts: dict[str, tuple[int, int]] = {}  # inter-node value -> its token split
    kinds = []
    for c, sp in zip(program.calls, plain):
        arg_of, params = node_params(c)
        if sequence:
            seq_in = {ph: layouts[a] for ph, a in arg_of.items() if a in layouts}
            # split at the entry only where a column-split linear will gather the tokens back
            acts = {ph for ph, a in arg_of.items() if a not in program.attrs} if sp is not None else set()
            sp = analyse(c.module, params, tp, seq_in, acts, columns=sp is not None)
            if sp.split and not divisible(sp, arg_of):
                sp = analyse(c.module, params, tp, seq_in, acts, columns=False)
        if sp is None or not (sp.split or sp.seq):
            kinds.append(REPLICATED)
            continue
        c.module = rewrite(c.module, sp, group, c.index)
        setattr(program.split, f"submod_{c.index}", c.module)
        for ph, (dim, blocks) in sp.shards.items():
            full = program.attr_value(arg_of[ph])
            with torch.no_grad():
                local = shard(full.detach(), dim, blocks, tp, group.rank)
            local = torch.nn.Parameter(local, requires_grad=True)
            _ORIGIN[id(local)] = (weakref.ref(local, _forget), weakref.ref(full))
            _set_attr(program, arg_of[ph], local)
        for i, lay in sp.out_seq.items():
            name = c.out_items.get(i) if c.out_items else c.out_name
            if name is not None:
                layouts[name] = lay
        tokens = bool(sp.entry or sp.out_seq or sp.rs or sp.enter_gathers)
        kinds.append((MEGATRON_SP if tokens else MEGATRON) if sp.split else SEQUENCE if tokens else REPLICATED)
    return kinds


def uses_sequence(partitioning: list[str]) -> bool:
    """Whether a plan's node partitionings were found with sequence parallelism (an empty list: the
    default, with it)."""
    return not partitioning or bool({MEGATRON_SP, SEQUENCE} & set(partitioning))


def record_tp(graph: Any, program: StepProgram) -> None:
    """Put a traced tensor-parallel program's degree, partitionings and collectives into its graph."""
    if program.tp is None:
        return
    graph.tp = program.tp.size
    for k, nd in enumerate(graph.nodes):
        nd.partitioning = program.partitioning[k]
        nd.tp_fwd_bytes, nd.tp_fwd_collectives, nd.tp_bwd_bytes, nd.tp_bwd_collectives = program.tp.node_bytes(k)
