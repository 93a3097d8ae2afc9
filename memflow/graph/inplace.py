"""In-place ops that would modify another node's output are made out of place.

A node's inputs enter it as views its program makes (:class:`memflow.graph.program.StepProgram`),
and autograd forbids modifying such a view in place. A model with ``nn.ReLU(inplace=True)`` as a
module of its own (torchvision's ResNet: ``conv1``, ``bn1``, ``relu`` side by side) does exactly
that at the default node granularity: the ``relu`` node modifies the ``bn1`` node's output. Before
the step is split, every such op (an ATen op that writes its first argument, that argument made by
another node) becomes its out-of-place form, and every later reader of the argument reads the new
value instead, as they would have read the modified one. Ops that modify their own node's tensors
stay in place, and so does a write to a view (a slice written in place changes its base; that is
left to torch, which names the op if it refuses).
"""
from __future__ import annotations

import torch
import torch.fx

__all__ = ["out_of_place", "functional_twin"]


def functional_twin(target) -> torch._ops.OpOverload | None:
    """The out-of-place ATen overload of an in-place one (``aten.relu_.default`` → ``aten.relu.default``),
    or None where ``target`` is not an ATen op writing its first argument, or has no such twin."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return None
    args = target._schema.arguments
    if not args or args[0].alias_info is None or not args[0].alias_info.is_write:
        return None
    name = target._schema.name.split("::")[-1]
    if not name.endswith("_") or name.endswith("__"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    if packet is None:
        return None
    twin = getattr(packet, target._overloadname, None)
    if twin is None:
        return None
    ret = twin._schema.returns
    if len(ret) != 1 or (twin._schema.arguments and twin._schema.arguments[0].alias_info is not None):
        return None
    return twin


def _is_view(node: torch.fx.Node) -> bool:
    t = node.target
    return isinstance(t, torch._ops.OpOverload) and bool(t._schema.returns) and \
        t._schema.returns[0].alias_info is not None


def out_of_place(gm: torch.fx.GraphModule, node_of: dict[torch.fx.Node, int]) -> int:
    """Rewrite ``gm`` (grouped into nodes by ``node_of``) so that no op modifies in place a tensor
    another node made; returns how many ops were rewritten."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    done = 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or not n.args or not isinstance(n.args[0], torch.fx.Node):
            continue
        twin = functional_twin(n.target)
        src = n.args[0]
        if twin is None or src.op != "call_function" or _is_view(src):
            continue
        if node_of.get(src) == node_of.get(n):
            continue
        with gm.graph.inserting_before(n):
            f = gm.graph.call_function(twin, n.args, n.kwargs)
        f.meta = dict(n.meta)
        order[f] = order[n] - 0.5
        node_of[f] = node_of.get(n, node_of.get(src, 0))
        later = [u for u in src.users if u is not n and order[u] > order[n]]
        for u in later:
            u.replace_input_with(src, f)
        n.replace_all_uses_with(f)
        gm.graph.erase_node(n)
        node_of.pop(n, None)
        done += 1
    if done:
        gm.graph.lint()
        gm.recompile()
    return done
