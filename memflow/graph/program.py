"""Run a split step node by node: forward, then backward node by node.

``StepProgram`` interprets the top graph produced by
:func:`memflow.graph.capture.split_step`: it calls ``submod_k`` for node ``k``
in order. Each node's tensor inputs that need gradients enter cut from the
graph that made them, so each node's backward is an explicit call, exactly
like a pipeline stage boundary. That gives the profiler exact per-node phases
(forward of node k, backward of node k) and lets the executor run any
contiguous range of nodes as a pipeline stage, wrap a node in
``checkpoint``, or run it under saved-tensor hooks.

They do not enter as detached leaves: a leaf's ``AccumulateGrad`` node, which
the node's autograd graph references, would hold it, and with it the value's
storage, until the node's backward. Plain autograd frees a value that no
backward saved at its last use (e.g. the input of an ``nn.LSTM(batch_first=True)``,
which the LSTM copies into a contiguous transposed layout), so the input enters
as a view made by :class:`_Enter`, which keeps nothing of the value and whose
backward hands the gradient over.

Values are named by the top graph's fx node names. ``forward_range`` runs
nodes ``[lo, hi)`` given the values they need; ``backward_range`` runs their
backward given the gradients of the values they sent onward.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx
from torch.utils._python_dispatch import _disable_current_modes
from torch.autograd.graph import get_gradient_edge

__all__ = ["StepProgram", "NodeCall", "ForwardState"]


@dataclass
class NodeCall:
    index: int
    module: torch.fx.GraphModule
    arg_names: list[str]  # values (top-graph names) the node reads
    out_name: str  # the call's value name
    out_items: dict[int, str]  # tuple index -> value name (getitem users); empty = single value


class _Enter(torch.autograd.Function):
    """A node's grad-requiring input as a view of the (detached) value; its backward puts the
    value's gradient into ``grads[name]`` (summed over reads). ``anchor`` is a grad-requiring
    empty tensor, so the view requires grad; it gets no gradient."""

    @staticmethod
    def forward(ctx, anchor, value, grads, name):
        ctx.grads, ctx.name = grads, name
        return value.view_as(value)

    @staticmethod
    def backward(ctx, g):
        prev = ctx.grads.get(ctx.name)
        ctx.grads[ctx.name] = g if prev is None else prev + g
        return None, None, None, None


@dataclass
class ForwardState:
    """What one node's forward left behind for its backward."""

    grads: dict[str, torch.Tensor] = field(default_factory=dict)  # value name -> its gradient, filled by the backward
    # value name -> GradientEdge of an output needing grad (the loss: the tensor itself);
    # edges, not tensors, so an output's storage dies with its last use as in plain autograd
    outputs: dict[str, Any] = field(default_factory=dict)


def _requires_grad(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad


class StepProgram:
    """The node-by-node program of a captured step."""

    def __init__(self, split: torch.fx.GraphModule, unread: list | tuple = (), carried: list | tuple = (),
                 routed: list | tuple = ()):
        self.split = split
        # model state no node reads, (name, owner node, tensor) (Captured.unread): held all the same
        self.unread = list(unread)
        # plain attributes the forward keeps state in (Captured.carried): state the program never updates
        self.carried = list(carried)
        # modules that size tensors by numbers read from tensors (Captured.routed)
        self.routed = list(routed)
        # tensor parallelism (memflow.graph.tp.apply_tp): the group's collectives and each node's
        # partitioning; None / empty: the program is the whole step
        self.tp: Any = None
        self.partitioning: list[str] = []
        self.placeholders: list[str] = []
        self.calls: list[NodeCall] = []
        self.loss_name = ""
        self.attrs: dict[str, str] = {}  # value name -> attribute path (shared parameters)
        # nodes whose last backward got no gradient for any output (a branch the loss does not read): no
        # backward ran through them (what they saved died with their outputs, nothing was replayed)
        self.no_backward: set[int] = set()
        by_call: dict[str, NodeCall] = {}
        for node in split.graph.nodes:
            if node.op == "placeholder":
                self.placeholders.append(node.name)
            elif node.op == "get_attr":
                self.attrs[node.name] = str(node.target)
            elif node.op == "call_module":
                idx = int(str(node.target).rsplit("_", 1)[1])
                call = NodeCall(
                    index=idx,
                    module=getattr(split, str(node.target)),
                    arg_names=[a.name for a in node.args],
                    out_name=node.name,
                    out_items={},
                )
                self.calls.append(call)
                by_call[node.name] = call
            elif node.op == "call_function" and node.target is operator.getitem:
                src = node.args[0].name
                by_call[src].out_items[int(node.args[1])] = node.name
            elif node.op == "output":
                out = node.args[0]
                out = out[0] if isinstance(out, (tuple, list)) else out
                self.loss_name = out.name
            else:
                raise RuntimeError(f"unexpected node in split graph: {node.op} {node.target}")
        self.calls.sort(key=lambda c: c.index)
        if [c.index for c in self.calls] != list(range(len(self.calls))):
            raise RuntimeError("split graph does not call its nodes in order")
        # for each value: the last node that reads it (to drop references early)
        self.last_reader: dict[str, int] = {}
        self.readers: dict[str, list[int]] = {}  # every node that reads it, in order
        for c in self.calls:
            for a in c.arg_names:
                self.last_reader[a] = c.index
                self.readers.setdefault(a, []).append(c.index)

    @property
    def n(self) -> int:
        return len(self.calls)

    def modules(self) -> list[torch.fx.GraphModule]:
        return [c.module for c in self.calls]

    def outputs_of(self, k: int) -> list[str]:
        c = self.calls[k]
        return list(c.out_items.values()) if c.out_items else [c.out_name]

    def values_crossing(self, boundary: int) -> list[str]:
        """Values made by nodes < boundary (not batch inputs) that nodes >= boundary read."""
        made = {}
        for c in self.calls[:boundary]:
            for v in self.outputs_of(c.index):
                made[v] = c.index
        need = []
        for c in self.calls[boundary:]:
            for a in c.arg_names:
                if a in made and a not in need:
                    need.append(a)
        return need

    # ------------------------------------------------------------ forward
    def forward_node(
        self,
        k: int,
        env: dict[str, Any],
        boundary: bool = True,
        wrap: Callable[[int, Callable], Callable] | None = None,
    ) -> ForwardState:
        """Run node k's forward, reading ``env`` and writing its outputs into it.

        With ``boundary`` each grad-requiring input enters cut from the graph that made
        it (see :class:`_Enter`) so node k's backward can be run on its own.
        ``wrap(k, fn)`` may wrap the call (checkpoint, saved-tensor hooks).
        """
        c = self.calls[k]
        st = ForwardState()
        args = []
        anchor = None
        for a in c.arg_names:
            v = env[a]
            if boundary and _requires_grad(v) and a not in self.attrs:
                if anchor is None:
                    anchor = torch.empty(0, device=v.device, requires_grad=True)
                v = _Enter.apply(anchor, v.detach(), st.grads, a)
            args.append(v)
        fn = c.module
        if wrap is not None:
            fn = wrap(k, fn)
        out = fn(*args)
        if c.out_items:
            for i, name in c.out_items.items():
                env[name] = out[i]
        else:
            env[c.out_name] = out
        for name in self.outputs_of(k):
            v = env[name]
            if _requires_grad(v):
                st.outputs[name] = v if name == self.loss_name else get_gradient_edge(v)
        return st

    def drop_dead(self, env: dict[str, Any], k: int, keep: set[str] | None = None, until: int | None = None) -> None:
        """Forget values no node after k reads (they may still live in autograd); with ``until`` (a pipeline
        stage's end), no node after k and before it: what later stages read reaches them sent on (``keep``) or
        as their own copy of the batch (a stage held a batch input a later stage reads too to its forward's
        end, 51 KiB above its plan: SpeechT5's attention mask)."""
        for a in list(env):
            if a == self.loss_name or a in self.attrs or (keep and a in keep):
                continue
            last = self.last_reader.get(a, -1)
            if until is not None and last >= until:
                last = max((r for r in self.readers[a] if r < until), default=-1)
            if last <= k:
                del env[a]

    # ----------------------------------------------------------- backward
    def backward_node(self, k: int, st: ForwardState, grads: dict[str, torch.Tensor]) -> None:
        """Run node k's backward. ``grads`` maps value name -> gradient; it is
        consumed for k's outputs and receives the gradients of k's inputs
        (summed when several nodes read the same value)."""
        outs, gouts = [], []
        for name, t in st.outputs.items():
            if name == self.loss_name:
                g = grads.pop(name, None)
                outs.append(t)
                gouts.append(g if g is not None else torch.ones_like(t))
                continue
            g = grads.pop(name, None)
            if g is None:
                continue
            outs.append(t)
            gouts.append(g)
        st.outputs.clear()
        (self.no_backward.discard if outs else self.no_backward.add)(k)
        if outs:
            torch.autograd.backward(outs, gouts)
        del outs, gouts
        for name, g in st.grads.items():
            prev = grads.get(name)
            grads[name] = g if prev is None else prev + g
        st.grads.clear()

    def unread_of(self, k: int) -> list[tuple[str, torch.Tensor]]:
        """The model state node ``k`` holds but no node reads, as (name, tensor)."""
        return [(name, t) for name, node, t in self.unread if node == k]

    def attr_value(self, name: str) -> Any:
        obj: Any = self.split
        for part in self.attrs[name].split("."):
            obj = getattr(obj, part)
        return obj

    def initial_env(self, inputs: list[torch.Tensor]) -> dict[str, Any]:
        """Batch inputs and shared attributes by value name."""
        env: dict[str, Any] = dict(zip(self.placeholders, inputs))
        for name in self.attrs:
            env[name] = self.attr_value(name)
        return env

    # ------------------------------------------------------------- whole step
    def run_step(self, inputs: list[torch.Tensor], on_phase: Callable[[int], None] | None = None,
                 wrap: Callable | None = None, watch: Any = None, consume: bool = False) -> torch.Tensor:
        """Forward + backward of the whole step, node by node; returns the (detached) loss.

        ``on_phase(p)`` is called as each phase starts (phase numbering of
        :mod:`memflow.graph.record`); ``on_phase(2n)`` marks the end of backward.
        ``watch``: an object whose ``forward(k, env)`` is called right before node k's forward
        (``env``: the values by name) and ``backward(k, state, grads)`` right before its backward
        (its :class:`ForwardState` and the gradients by value name); it must keep no tensor.
        ``consume``: empty ``inputs`` once read, so that, as the executor's, the step alone holds them
        (each let go with its last reader's forward, or when autograd lets it go).
        """
        n = self.n
        # under autocast, as a training loop's `with autocast(): loss = ...` runs it: the forward
        # casts the parameters afresh (none cached by an earlier step), and its cached casts die
        # when it ends unless the backward saved them
        torch.clear_autocast_cache()
        env = self.initial_env(inputs)
        if consume:
            inputs.clear()
        states = []
        for k in range(n):
            if on_phase:
                on_phase(k)
            if watch is not None:
                watch.forward(k, env)
            states.append(self.forward_node(k, env, wrap=wrap))
            self.drop_dead(env, k)
        torch.clear_autocast_cache()
        loss = env[self.loss_name]
        grads: dict[str, torch.Tensor] = {}
        out = None
        for k in range(n - 1, -1, -1):
            if on_phase:
                on_phase(2 * n - 1 - k)
            if watch is not None:
                watch.backward(k, states[k], grads)
            self.backward_node(k, states[k], grads)
            states[k] = None
            if out is None:  # the loss's value kept, its storage let go with its node's backward, as the
                # executor keeps each micro-batch's (CPU's mse_loss returns a 0-dim view of its unreduced buffer);
                # the copy made outside every mode: no op of the step's, no memory a trace counts
                with _disable_current_modes():
                    out = loss.detach().clone()
                del loss, env[self.loss_name]
        grads.clear()
        del env
        if on_phase:
            on_phase(2 * n)
        return out
