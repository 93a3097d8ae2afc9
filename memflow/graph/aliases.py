"""Parameters a node hands on as views: what a ZeRO-3 unit must not shard.

A ZeRO-3 unit's parameters are views of one flat buffer whose storage is resized to zero bytes after
the node's pass (:mod:`memflow.executor.zero3`). A node whose output is a view of one of them (a learned
query set ``self.queries.expand(b, -1, -1)`` handed to the next node as well as used here, a slice of a
positional table) hands the next node a tensor on that storage: read after the unit is freed, it reads
freed memory (a segfault on the CPU, garbage on a GPU). Such a parameter is kept whole, as one several
nodes read (:func:`memflow.executor.zero3.unit_params`, :func:`simulator.zero3.node_units`).

Found statically from each node's graph: an output aliases an input where a chain of view ops (an op
whose schema returns an alias of an argument: ``expand``, ``transpose``, ``split``'s items, ``view``)
leads from that input to it; across nodes transitively (a view of a view handed on twice).
"""
from __future__ import annotations

import operator
from typing import Any

import torch

__all__ = ["escaping_attrs", "escaping_params", "output_aliases"]


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


def output_aliases(gm: torch.fx.GraphModule) -> dict[int, set[int]]:
    """For each output position of ``gm`` (0 for a single output), the placeholder positions it may be a
    view of; positions with none are left out."""
    place: dict[torch.fx.Node, set[int]] = {}
    alias: dict[torch.fx.Node, set[int]] = {}
    outs: list = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            place[n] = {len(place)}
            alias[n] = place[n]
        elif n.op == "call_function":
            s: set[int] = set()
            for a in _aliased_args(n):
                s |= alias.get(a, set())
            if s:
                alias[n] = s
        elif n.op == "output":
            o = n.args[0]
            outs = list(o) if isinstance(o, (tuple, list)) else [o]
    return {i: alias[o] for i, o in enumerate(outs) if isinstance(o, torch.fx.Node) and o in alias}


def escaping_attrs(program: Any) -> set[str]:
    """The program's attribute values (``program.attrs`` names: parameters and buffers) of which a view
    made by one node is read by another node."""
    views: dict[str, set[str]] = {}  # value name -> attrs it may be a view of
    made_by: dict[str, int] = {}
    out: set[str] = set()
    for c in program.calls:
        base = []
        for a in c.arg_names:
            if a in program.attrs:
                base.append({a})
            else:
                base.append(views.get(a, set()))
                if views.get(a) and made_by.get(a, c.index) != c.index:
                    out |= views[a]
        names = c.out_items if c.out_items else {0: c.out_name}
        for pos, ps in output_aliases(c.module).items():
            if pos in names:
                s = set().union(*(base[p] for p in ps if p < len(base)))
                if s:
                    views[names[pos]] = s
                    made_by[names[pos]] = c.index
    return out


def escaping_params(program: Any) -> set[int]:
    """``id`` of each tensor :func:`escaping_attrs` names."""
    return {id(program.attr_value(a)) for a in escaping_attrs(program)}
