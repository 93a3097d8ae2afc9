"""Selective figures node by node: one short run per distinct node instead of a traced step.

:func:`memflow.profile.selective.selective_figures` traces a whole forward and backward with
every node ``selective``; a node's figures there (the bytes its forward leaves for its backward,
its backward's transient, the replay's costs) depend only on the node's own program and on what
stands around it in that step: its inputs' layouts and which of them its backward is the last
to hold (not its maker's policy, nor the checkpoint of an earlier reader whose forward saved
something) or a later node's forward still reads, the gradients handed to its backward (and those of its inputs already summed, and of
its parameters already made, by nodes after it), and whether it makes the loss. All of that is
recorded while the plain step is traced (:class:`NodeWatch`: layouts only, no tensor kept), so
each node can be run on its own: fresh fake tensors of those layouts, its forward under the
``selective`` action, its outputs dropped, its backward, under the same counters, the figures
read off the same way. Nodes alike in all of that (a transformer's repeated blocks) give the
same figures, so one run serves them all: a fake GPT-2 medium's 29 nodes take 7 runs.

Where something stands around a node that this does not reproduce (real tensors, whose values
an op may read; an input that is a view of the model's state; a parameter that several nodes
read, under autocast, whose cached cast one node's replay leaves for another's) it raises
:class:`NotByNode` and the caller traces the step. The figures equal the traced step's
(``tests/test_selective_nodes.py`` compares them on the example models).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor

from ..graph.actions import make_wrap
from ..graph.program import StepProgram
from ..kinds import SELECTIVE
from ..memory import LiveBytes, storages
from .fakecache import warm_call
from .opcost import OpCost

__all__ = ["NodeWatch", "NotByNode", "NodeContext", "node_figures", "run_node"]

# the phases of one node's run: its inputs made, its forward, the later nodes' forwards (its
# outputs dropped), its backward, after it
_PRE, _FWD, _MID, _BWD, _POST = range(5)


class NotByNode(Exception):
    """The step's selective figures cannot be had node by node (why: the message)."""


def _layout(t: torch.Tensor) -> tuple:
    """What a fake tensor is made of: shape, strides, offset, dtype, device, requires_grad and the
    bytes of its storage."""
    try:
        return (tuple(int(x) for x in t.shape), tuple(int(x) for x in t.stride()), int(t.storage_offset()),
                t.dtype, t.device, bool(t.requires_grad), int(t.untyped_storage().nbytes()))
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:  # symbolic sizes, a subclass
        raise NotByNode(f"a tensor without a plain layout: {e}") from None


def _key(t: torch.Tensor) -> int:
    sts = storages(t)
    return id(sts[0]) if sts else id(t)


class NodeWatch:
    """What each node's selective figures depend on beyond its program, recorded during the plain
    traced step (:meth:`memflow.graph.program.StepProgram.run_step`'s ``watch``) from ``live``,
    the trace's counter: per node, its inputs (a value made by a node: its layout and the
    counter's record of its storage) and, before its backward, the gradients of its outputs,
    those of its inputs already summed and those of its parameters already made (layouts, and
    whether something else holds their storage past its backward)."""

    def __init__(self, program: StepProgram, live: LiveBytes):
        self.program, self.live = program, live
        self.state_names = set(program.placeholders) | set(program.attrs)
        self.params = [p for p in program.split.parameters()]
        self.args: list[list | None] = [None] * program.n
        self.back: list[tuple | None] = [None] * program.n
        self.first_reader: dict[int, int] = {}  # id(event) -> the first node whose forward read the storage
        self.last_reader: dict[int, int] = {}  # id(event) -> the last such node
        self.events: dict[int, Any] = {}  # id(event) -> event (kept: the ids stay unique)
        self.bad = ""

    def forward(self, k: int, env: dict) -> None:
        rec = []
        for a in self.program.calls[k].arg_names:
            v = env[a]
            if a in self.state_names:
                rec.append((a, "state", None))
            elif not isinstance(v, torch.Tensor):
                if isinstance(v, (list, tuple, dict)):
                    self.bad = self.bad or f"node {k} reads a container value {a}"
                rec.append((a, "const", v))
            else:
                ev = self.live.event_of(v)
                if ev is None:
                    self.bad = self.bad or f"node {k} reads {a}, a view of the model's state"
                    continue
                self.events[id(ev)] = ev
                self.first_reader.setdefault(id(ev), k)
                self.last_reader[id(ev)] = k
                try:
                    rec.append((a, "value", (_layout(v), id(ev))))
                except NotByNode as e:
                    self.bad = self.bad or str(e)
        self.args[k] = rec

    def backward(self, k: int, st: Any, grads: dict) -> None:
        prog = self.program
        c = prog.calls[k]
        mine = set(st.outputs) | set(c.arg_names)
        # storages held past this backward: other values' gradients and every parameter's
        held = {_key(g) for name, g in grads.items() if name not in mine and isinstance(g, torch.Tensor)}
        held |= {_key(p.grad) for p in self.params if p.grad is not None}
        try:
            # (layout, storage, held past this backward, id of the trace's record of the storage: the
            # node's run tells how its backward's peak falls once that storage is freed, Buffer.sel_free_gap)
            outs = []
            for name in st.outputs:
                g = None if name == prog.loss_name else grads.get(name)
                outs.append((name, None if g is None else (_layout(g), _key(g), _key(g) in held, self._evid(g))))
            pending = [(a, (_layout(grads[a]), _key(grads[a]), _key(grads[a]) in held, self._evid(grads[a])))
                       for a in dict.fromkeys(c.arg_names) if isinstance(grads.get(a), torch.Tensor)]
            pgrads = tuple(None if p.grad is None else _layout(p.grad) for p in _node_params(prog, k))
        except NotByNode as e:
            self.bad = self.bad or str(e)
            return
        self.back[k] = (tuple(outs), tuple(pending), pgrads)

    def _evid(self, t: torch.Tensor) -> int | None:
        ev = self.live.event_of(t)
        return None if ev is None else id(ev)


def _node_params(program: StepProgram, k: int) -> list[torch.Tensor]:
    """The parameters node ``k`` reads: shared ones handed in, then its own."""
    c = program.calls[k]
    out = [program.attr_value(a) for a in c.arg_names if a in program.attrs]
    out += [p for _, p in c.module.named_parameters(remove_duplicate=False)]
    return [p for p in out if isinstance(p, torch.nn.Parameter)]


class _Ref:
    __slots__ = ("i",)

    def __init__(self, i: int):
        self.i = i

    def __repr__(self) -> str:
        return f"%{self.i}"


def _canon(gm: torch.nn.Module) -> tuple:
    """A node program with its names left out: two nodes with equal canons run the same ops on
    arguments of the same layouts (their attributes' layouts are in it)."""
    if not isinstance(gm, torch.fx.GraphModule):
        return ("module", type(gm).__qualname__,
                tuple((n, _layout(t)) for n, t in gm.named_parameters(remove_duplicate=False)),
                tuple((n, _layout(t)) for n, t in gm.named_buffers(remove_duplicate=False)))
    idx: dict = {}
    rows = []
    for i, nd in enumerate(gm.graph.nodes):
        idx[nd] = i
        if nd.op == "placeholder":
            rows.append(("placeholder",))
            continue
        if nd.op in ("get_attr", "call_module"):
            obj: Any = gm
            for part in str(nd.target).split("."):
                obj = getattr(obj, part)
            target: Any = (_layout(obj) if isinstance(obj, torch.Tensor)
                           else _canon(obj) if isinstance(obj, torch.nn.Module) else repr(type(obj)))
        else:
            target = str(nd.target) if isinstance(nd.target, str) else repr(nd.target)
        args = torch.fx.node.map_arg((nd.args, nd.kwargs), lambda x: _Ref(idx[x]))
        rows.append((nd.op, target, repr(args)))
    return tuple(rows)


class _Grad(torch.autograd.Function):
    """A made input as a value needing a gradient, as a node's output is (not a leaf: autocast
    caches no cast of it)."""

    @staticmethod
    def forward(ctx, anchor, value):
        return value.view_as(value)

    @staticmethod
    def backward(ctx, g):
        return None, None


def _make(layout: tuple, bases: dict, key: Any, anchor: torch.Tensor | None = None) -> torch.Tensor:
    """A fresh fake tensor of ``layout``; the tensors made under one ``key`` share one storage."""
    shape, stride, offset, dtype, device, requires_grad, nbytes = layout
    base = bases.get(key)
    if base is None:
        size = torch.empty((), dtype=dtype).element_size()
        if nbytes % size:
            raise NotByNode("a storage shared by tensors of several dtypes")
        base = bases[key] = torch.empty((nbytes // size,), dtype=dtype, device=device)
    elif base.dtype != dtype:
        raise NotByNode("a storage shared by tensors of several dtypes")
    t = base.as_strided(shape, stride, offset)
    return _Grad.apply(anchor, t) if requires_grad and anchor is not None else t


class NodeContext:
    """One node's surroundings as :class:`NodeWatch` saw them, resolved for its run."""

    def __init__(self, watch: NodeWatch, k: int, held_out: dict[int, frozenset], held_in: dict[int, bool]):
        prog = watch.program
        if watch.args[k] is None or watch.back[k] is None:
            raise NotByNode(f"node {k} was not seen whole")
        self.k = k
        self.args = watch.args[k]
        self.outs, self.pending, self.pgrads = watch.back[k]
        self.loss = prog.loss_name in prog.outputs_of(k)
        self.freed: set[str] = set()  # value inputs whose storage this node's backward is the last to hold
        self.freed_args: list[tuple[int, int]] = []  # (position, id(event)) of those inputs
        self.read_later: set[str] = set()  # of them, those a later node's forward reads: alive past this one's
        groups: dict[int, int] = {}
        arg_key = []
        for i, (a, kind, payload) in enumerate(self.args):
            if kind == "state":  # a batch input (by position) or a shared attribute (its layout and storage)
                if a in prog.attrs:
                    t = prog.attr_value(a)
                    arg_key.append(("attr", _layout(t), groups.setdefault(_key(t), i))
                                   if isinstance(t, torch.Tensor) else ("attr", repr(t)))
                else:
                    arg_key.append(("batch", prog.placeholders.index(a)))
                continue
            if kind == "const":
                arg_key.append(("const", repr(payload)))
                continue
            layout, evid = payload
            ev = watch.events[evid]
            q = ev.alloc_phase
            if watch.first_reader[evid] == k:
                if not 0 <= q < k:
                    raise NotByNode(f"node {k} reads {a}, made outside the forward of a node before it")
                if a not in prog.outputs_of(q):
                    raise NotByNode(f"node {k} reads {a}, not an output of node {q} that made it")
            # the last to hold it, unless its maker's policy holds it or an earlier reader's checkpoint does
            # (one whose forward saved something: a reader that saved nothing, e.g. one that reads only its
            # dtype, lets it go as its forward ends)
            freed = prog.outputs_of(q).index(a) not in held_out[q] and not held_in.get(evid, False)
            later = freed and watch.last_reader[evid] > k
            if freed:
                self.freed.add(a)
                self.freed_args.append((i, evid))
            if later:
                self.read_later.add(a)
            arg_key.append(("value", layout, groups.setdefault(evid, i), freed, later))
        self.key = (_canon(prog.calls[k].module), tuple(arg_key),
                    tuple(None if g is None else (g[0], g[2]) for _, g in self.outs),
                    tuple((prog.calls[k].arg_names.index(a), g[0], g[2]) for a, g in self.pending),
                    self.pgrads, self.loss, _alias(self.outs, self.pending))


def _alias(outs: tuple, pending: tuple) -> tuple:
    """Which of a node's gradients share a storage (by first position)."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(g[1], i) for i, (_, g) in enumerate(list(outs) + list(pending)) if g is not None)


def _made(prog: StepProgram, ctx: NodeContext, env0: dict) -> tuple[dict, dict, list]:
    """The node's inputs, the gradients handed to its backward, and what stays held past it."""
    bases: dict = {}
    anchor = None
    env: dict = {}
    keep: list = []
    for a, kind, payload in ctx.args:
        if kind == "state":
            env[a] = env0[a]
        elif kind == "const":
            env[a] = payload
        else:
            layout, evid = payload
            if layout[5] and anchor is None:
                anchor = torch.empty(0, device=layout[4], requires_grad=True)
            env[a] = _make(layout, bases, ("v", evid), anchor)
            if a not in ctx.freed:
                keep.append(env[a])
    grads: dict = {}
    for name, g in list(ctx.outs) + list(ctx.pending):
        if g is not None:
            grads[name] = _make(g[0][:5] + (False,) + g[0][6:], bases, ("g", g[1]))
            if g[2]:
                keep.append(grads[name])
    for p, lay in zip(_node_params(prog, ctx.k), ctx.pgrads):
        if lay is not None:
            p.grad = _make(lay[:5] + (False,) + lay[6:], bases, ("p", id(p)))
    return env, grads, keep


def run_node(prog: StepProgram, ctx: NodeContext, state: list, inputs: list,
             cast_keys: dict | None = None) -> tuple[dict, frozenset, frozenset]:
    """One node's run (see the module docstring): its figures (the backward's costs whole), the
    positions of its outputs that its own backward holds (the expensive ops' outputs) and those of its
    freed inputs that it holds past its forward (its checkpoint's, where the forward saved anything). ``cast_keys``
    (:meth:`memflow.memory.LiveBytes.watch_casts`): the figures without those casts too (``*_nc``)."""
    k = ctx.k
    cost = OpCost()
    live = LiveBytes(record=True, after=cost.count, call=warm_call)
    if cast_keys:
        live.watch_casts(cast_keys)
    live.track(state, kind="state")
    state_bytes = live.live
    live.hold_old({_BWD: _FWD})  # (its backward's peak with what it frees of its inputs held to its end)
    live.follow_frees()  # (the gradients handed in that its backward frees: how far its peak falls after each)
    live.follow_grads()  # (its backward's peak as a later micro-batch's, the gradients it makes there already)
    there: set = set()  # (the parameters whose gradients nodes after it made: its backward adds into them)

    def grad_made(prm):
        if live.phase == _BWD and id(prm) not in there and prm.grad is not None:
            there.add(id(prm))
            live.grad_made(sum(st.nbytes() for st in storages(prm.grad)))

    def on_phase(p: int) -> None:
        live.set_phase(p)
        cost.phase = p

    wrap = make_wrap([SELECTIVE] * prog.n, None, preserve_rng_state=False)
    env0 = prog.initial_env(inputs)
    params = _node_params(prog, k)
    hooks = [p.register_post_accumulate_grad_hook(grad_made) for p in params if p.requires_grad]
    try:
        with live:
            on_phase(_PRE)
            env, grads, keep = _made(prog, ctx, env0)
            handed = [live.event_of(grads[name]) if g is not None else None
                      for name, g in list(ctx.outs) + list(ctx.pending)]
            ins = [(i, live.event_of(env[ctx.args[i][0]])) for i, _ in ctx.freed_args]
            # (let go after the forward, as a later node's forward ends: its checkpoint's, if it holds them)
            later = [env[a] for a in ctx.read_later]
            torch.clear_autocast_cache()
            on_phase(_FWD)
            st = prog.forward_node(k, env, wrap=wrap)
            outs = [live.event_of(v) if isinstance(v := env.get(name), torch.Tensor) else None
                    for name in prog.outputs_of(k)]
            loss = env[prog.loss_name] if ctx.loss else None  # (let go with its backward, as the step's run_step)
            env.clear()
            del v
            on_phase(_MID)
            later.clear()
            torch.clear_autocast_cache()
            held = frozenset(i for i, ev in enumerate(outs)
                             if ev is not None and ev.alloc_phase == _FWD and ev.free_phase < 0)
            there.update(id(p) for p in params if p.grad is not None)
            on_phase(_BWD)
            prog.backward_node(k, st, grads)
            del loss
            on_phase(_POST)
            del st, keep, grads
            for p in params:
                p.grad = None
    finally:
        for h in hooks:
            h.remove()
        for p in params:
            p.grad = None
    evs = [ev for ev in live.events if ev.nbytes]
    saved = sum(ev.nbytes for ev in evs if ev.alloc_phase == _FWD and ev.free_phase == _BWD)
    carried = sum(ev.nbytes for ev in evs if ev.alloc_phase < _BWD and not 0 <= ev.free_phase <= _BWD)
    carried_f = sum(ev.nbytes for ev in evs if ev.alloc_phase < _FWD and not 0 <= ev.free_phase <= _FWD)
    # (held: its outputs its own backward holds; the loss is no output later nodes read)
    held_out = sum(outs[i].nbytes for i, name in enumerate(prog.outputs_of(k)) if i in held and name != prog.loss_name)
    holds = frozenset(i for i, ev in ins if ev is not None and not 0 <= ev.free_phase < _BWD)
    trans = max(0, live.phase_peak.get(_BWD, 0) - state_bytes - carried)
    figs = dict(saved=saved, held_out=held_out, trans=trans,
                held_trans=max(trans, live.phase_peak_held_f.get(_BWD, 0) - state_bytes - carried),
                steady=min(trans, max(0, live.phase_peak_steady.get(_BWD, 0) - state_bytes - carried)),
                ftrans=max(0, live.phase_peak.get(_FWD, 0) - state_bytes - carried_f),
                flops=cost.flops.get(_BWD, 0.0), bytes=cost.bytes.get(_BWD, 0.0), ops=cost.ops.get(_BWD, 0))
    # per gradient handed in (by position), freed in its backward: the run's free_gap (-1: none told; under
    # autocast's casts of gathered weights, whose figures without them are had too, none is)
    figs["gaps"] = tuple(ev.free_gap if ev is not None and ev.free_phase == _BWD and not cast_keys else -1
                         for ev in handed)
    if cast_keys:
        evs = [ev for ev in evs if not ev.cast]
        figs.update(
            saved_nc=sum(ev.nbytes for ev in evs if ev.alloc_phase == _FWD and ev.free_phase == _BWD),
            trans_nc=max(0, live.phase_peak_nc.get(_BWD, 0) - state_bytes - sum(
                ev.nbytes for ev in evs if ev.alloc_phase < _BWD and not 0 <= ev.free_phase <= _BWD)),
            ftrans_nc=max(0, live.phase_peak_nc.get(_FWD, 0) - state_bytes - sum(
                ev.nbytes for ev in evs if ev.alloc_phase < _FWD and not 0 <= ev.free_phase <= _FWD)))
    return figs, held, holds


def node_figures(watch: NodeWatch, inputs: list[torch.Tensor], state: list[torch.Tensor], keep_cost: OpCost,
                 *, autocast: bool, cast_keys: dict | None = None) -> list[dict]:
    """Per node, the ``sel_*`` fields :func:`memflow.profile.selective.selective_figures` gives,
    from one run per distinct node (see the module docstring). ``watch``: what the plain traced
    step recorded; ``state``: the tensors it counted as state (the batch not among them);
    ``keep_cost``: its op costs per phase; ``autocast``: the step runs under autocast; ``cast_keys``: the
    parameters' casts a ZeRO-3 unit gathers in bf16 (the ``low_sel_*`` figures without them). Raises
    :class:`NotByNode` where the figures cannot be had this way."""
    prog = watch.program
    n = prog.n
    if watch.bad:
        raise NotByNode(watch.bad)
    if not all(isinstance(t, FakeTensor) for t in list(inputs) + watch.params if isinstance(t, torch.Tensor)):
        raise NotByNode("real tensors: an op may read their values")
    if autocast:
        readers: dict[str, int] = {}
        for c in prog.calls:
            for a in dict.fromkeys(c.arg_names):
                if a in prog.attrs:
                    readers[a] = readers.get(a, 0) + 1
        if any(v > 1 for v in readers.values()):
            raise NotByNode("a parameter read by several nodes under autocast")
    state = list(state) + list(inputs)
    runs: dict[tuple, tuple[dict, frozenset, frozenset]] = {}
    held_out: dict[int, frozenset] = {}
    held_in: dict[int, bool] = {}  # id(event) -> a reader's checkpoint holds it past that reader's forward
    out = []
    for k in range(n):
        ctx = NodeContext(watch, k, held_out, held_in)
        got = runs.get(ctx.key)
        if got is None:
            got = runs[ctx.key] = run_node(prog, ctx, state, inputs, cast_keys)
        figs, held_out[k], holds = got
        for i, evid in ctx.freed_args:
            held_in[evid] = held_in.get(evid, False) or i in holds
        bp = 2 * n - 1 - k
        handed = [g for _, g in list(ctx.outs) + list(ctx.pending)]
        gaps = {g[3]: v for g, v in zip(handed, figs["gaps"]) if g is not None and g[3] is not None and v >= 0}
        out.append(dict(
            _sel_gaps=gaps,
            sel_saved_bytes=figs["saved"],
            sel_held_out_bytes=figs["held_out"],
            sel_bwd_transient_bytes=figs["trans"],
            sel_held_bwd_transient_bytes=figs["held_trans"],
            sel_steady_bwd_transient_bytes=figs["steady"],
            sel_fwd_transient_bytes=figs["ftrans"],
            sel_replay_flops=max(0.0, figs["flops"] - keep_cost.flops.get(bp, 0.0)),
            sel_replay_bytes_accessed=max(0.0, figs["bytes"] - keep_cost.bytes.get(bp, 0.0)),
            sel_replay_ops=max(0, figs["ops"] - keep_cost.ops.get(bp, 0)),
            low_sel_saved_bytes=figs.get("saved_nc", -1),
            low_sel_bwd_transient_bytes=figs.get("trans_nc", -1),
            low_sel_fwd_transient_bytes=figs.get("ftrans_nc", -1),
        ))
    return out
