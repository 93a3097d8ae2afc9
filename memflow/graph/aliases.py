"""Parameters a node hands on as views: what a ZeRO-3 unit must not shard.

A ZeRO-3 unit's parameters are views of one flat buffer whose storage is resized to zero bytes after
the node's pass (:mod:`memflow.executor.zero3`). A node whose output is a view of one of them (a learned
query set ``self.queries.expand(b, -1, -1)`` handed to the next node as well as used here, a slice of a
positional table) hands the next node a tensor on that storage: read after the unit is freed, it reads
freed memory (a segfault on the CPU, garbage on a GPU). Such a parameter is kept whole, as one several
nodes read (:func:`memflow.executor.zero3.unit_params`, :func:`simulator.zero3.node_units`).

Found statically from each node's graph: an output aliases an input where a chain of view ops (an op
whose schema returns an alias of an argument: ``expand``, ``transpose``, ``split``'s items, ``view``, an
in-place op's result) leads from that input to it; across nodes transitively (a view of a view handed on
twice), and through the graph modules a node calls (a ``no_grad`` region of the forward is one:
``wrap_with_set_grad_enabled``). A parameter a node changes in place (a WGAN critic clipping its weights
in ``forward``) is kept whole too: changed in a gathered copy, the change would be lost with it.
"""
from __future__ import annotations

import operator
from typing import Any

import torch

__all__ = ["alias_reads", "escaping_attrs", "escaping_params", "input_view_reads", "output_aliases", "replay_unsafe",
           "replay_unsafe_nodes", "written_attrs", "written_params"]


def _aliased_args(node: torch.fx.Node) -> list[Any]:
    """The arguments of ``node`` its output may be a view of (none where it makes new storage)."""
    if node.target is operator.getitem:
        return [node.args[0]]
    schema = getattr(node.target, "_schema", None)
    if schema is None or not any(r.alias_info is not None for r in schema.returns):
        return []
    out = []
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None:
            continue
        v = node.args[i] if i < len(node.args) else node.kwargs.get(a.name)
        if isinstance(v, torch.fx.Node):
            out.append(v)
    return out


def _submodule_call(gm: torch.fx.GraphModule, node: torch.fx.Node) -> tuple[Any, list]:
    """``(graph module, its arguments)`` where ``node`` calls a graph module of ``gm`` (a higher-order op
    such as ``wrap_with_set_grad_enabled(False, submod, *args)``: a ``no_grad`` region of the forward),
    else ``(None, [])``."""
    for i, a in enumerate(node.args):
        if isinstance(a, torch.fx.Node) and a.op == "get_attr":
            sub = getattr(gm, str(a.target), None)
            if isinstance(sub, torch.fx.GraphModule):
                return sub, list(node.args[i + 1:])
    return None, []


def _walk(gm: torch.fx.GraphModule) -> tuple[dict[int, set[int]], set[int]]:
    """``(output_aliases, written)``: per output position the placeholder positions it may be a view of,
    and the placeholder positions an op writes in place (``clamp_`` on a parameter), through the graph
    modules it calls."""
    place: dict[torch.fx.Node, set[int]] = {}
    alias: dict[torch.fx.Node, set[int]] = {}
    items: dict[torch.fx.Node, dict[int, set[int]]] = {}  # a called graph module's outputs, per position
    written: set[int] = set()
    outs: list = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            place[n] = {len(place)}
            alias[n] = place[n]
        elif n.op == "call_function":
            sub, args = _submodule_call(gm, n)
            if sub is not None:
                sub_out, sub_written = _walk(sub)
                arg_alias = [alias.get(a, set()) if isinstance(a, torch.fx.Node) else set() for a in args]
                for p in sub_written:
                    if p < len(arg_alias):
                        written |= arg_alias[p]
                items[n] = {pos: set().union(*(arg_alias[p] for p in ps if p < len(arg_alias)))
                            for pos, ps in sub_out.items()}
                continue
            if n.target is operator.getitem and n.args and n.args[0] in items:
                s = items[n.args[0]].get(n.args[1], set()) if isinstance(n.args[1], int) else set()
                if s:
                    alias[n] = s
                continue
            s: set[int] = set()
            for a in _aliased_args(n):
                s |= alias.get(a, set())
            if s:
                alias[n] = s
            written |= set().union(*(alias.get(a, set()) for a in _written_args(n)))
        elif n.op == "output":
            o = n.args[0]
            outs = list(o) if isinstance(o, (tuple, list)) else [o]
    return {i: alias[o] for i, o in enumerate(outs) if isinstance(o, torch.fx.Node) and o in alias}, written


def _written_args(node: torch.fx.Node) -> list[Any]:
    """The arguments ``node`` writes in place (a ``Tensor(a!)`` in its schema)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return []
    out = []
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            v = node.args[i] if i < len(node.args) else node.kwargs.get(a.name)
            if isinstance(v, torch.fx.Node):
                out.append(v)
    return out


def output_aliases(gm: torch.fx.GraphModule) -> dict[int, set[int]]:
    """For each output position of ``gm`` (0 for a single output), the placeholder positions it may be a
    view of; positions with none are left out."""
    return _walk(gm)[0]


def _scan(program: Any, reads: list | None = None) -> tuple[set[str], set[str]]:
    """``(escaping, written)``: see :func:`escaping_attrs` and :func:`written_attrs`; ``reads`` (a list)
    receives per node the attrs it reads through views another node handed on (:func:`alias_reads`)."""
    views: dict[str, set[str]] = {}  # value name -> attrs it may be a view of
    made_by: dict[str, int] = {}
    out: set[str] = set()
    changed: set[str] = set()
    inputs = set(program.placeholders)
    for c in program.calls:
        base = []
        handed: set[str] = set()
        for a in c.arg_names:
            if a in program.attrs or a in inputs:
                base.append({a})
            else:
                base.append(views.get(a, set()))
                if views.get(a) and made_by.get(a, c.index) != c.index:
                    out |= views[a]
                    handed |= views[a]
        if reads is not None:
            reads.append(handed)
        names = c.out_items if c.out_items else {0: c.out_name}
        aliased, written = _walk(c.module)
        for p in written:  # changed in place by a node (a WGAN critic's clipping in forward): one tensor
            if p < len(base):
                changed |= base[p]
        for pos, ps in aliased.items():
            if pos in names:
                s = set().union(*(base[p] for p in ps if p < len(base)))
                if s:
                    views[names[pos]] = s
                    made_by[names[pos]] = c.index
    return (out | changed) - inputs, changed - inputs


def alias_reads(program: Any) -> list[set[str]]:
    """Per node of ``program``, the attrs (``program.attrs`` names) it reads through a view another node
    handed on (a WGAN critic's clipped weights, its first node's outputs, read by every later node): on
    a later pipeline stage they arrive as values, so that stage holds them as a reader of them does."""
    reads: list[set[str]] = []
    _scan(program, reads)
    return [r - set(program.placeholders) for r in reads]


def input_view_reads(program: Any) -> list[set[str]]:
    """Per node of ``program``, the batch inputs (``program.placeholders`` names) it reads through a view
    another node made (a GNN's ``src, dst = edges[0], edges[1]`` before its layers' loop, read by every
    layer): a later pipeline stage receives those views and holds them as a reader of the input does."""
    reads: list[set[str]] = []
    _scan(program, reads)
    return [r & set(program.placeholders) for r in reads]


def escaping_attrs(program: Any) -> set[str]:
    """The program's attribute values (``program.attrs`` names: parameters and buffers) of which a view
    made by one node is read by another node, or which a node changes in place."""
    return _scan(program)[0]


def written_attrs(program: Any) -> set[str]:
    """The program's attribute values a node changes in place in the forward (a BatchNorm's running
    statistics, a WGAN critic's clipped weights)."""
    return _scan(program)[1]


def escaping_params(program: Any) -> set[int]:
    """``id`` of each tensor :func:`escaping_attrs` names."""
    return {id(program.attr_value(a)) for a in escaping_attrs(program)}


def written_params(program: Any) -> set[int]:
    """``id`` of each trainable parameter :func:`written_attrs` names: two forwards before a backward
    (micro-batches in flight) would find the first one's saved copy changed, as autograd then says."""
    out = set()
    for a in written_attrs(program):
        t = program.attr_value(a)
        if isinstance(t, torch.nn.Parameter) and t.requires_grad:
            out.add(id(t))
    return out


def replay_unsafe(gm: torch.fx.GraphModule) -> bool:
    """Whether running ``gm`` again (a recomputed node's replay in its backward) could compute other
    values than its forward did: it changes one of its inputs in place (through the graph modules it
    calls) and its outputs depend on that input. Spectral normalisation's power iteration updates its
    ``u``/``v`` buffers and builds the weight from them: replayed, it starts from the updated vectors
    (an outside GAN discriminator's recomputed plan trained 0.5% off plain training's losses by its
    third step). BatchNorm's running statistics are not among them (``batch_norm``'s schema declares no
    write, and its training output does not read them); a write nothing reads after (its step counter)
    is not either. Conservative where it cannot tell: every output of a called graph module depends on
    all of its arguments."""
    _, written = _walk(gm)
    if not written:
        return False
    dep: dict[torch.fx.Node, set[int]] = {}
    place = 0
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            dep[n] = {place}
            place += 1
        elif n.op == "output":
            return any(dep.get(a, set()) & written for a in n.all_input_nodes)
        else:
            dep[n] = set().union(*(dep.get(a, set()) for a in n.all_input_nodes))
    return False


def replay_unsafe_nodes(program: Any) -> list[int]:
    """The nodes of ``program`` whose replay :func:`replay_unsafe` says could differ from their forward:
    recomputed or selective, they would train otherwise than plain training, so they keep."""
    return [k for k, c in enumerate(program.calls) if replay_unsafe(c.module)]
