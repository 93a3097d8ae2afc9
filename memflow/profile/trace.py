"""Trace one training step node by node and turn it into a TaskGraph.

The step runs through :class:`memflow.graph.program.StepProgram` under two
dispatch modes: :class:`memflow.memory.LiveBytes` (every storage's bytes and
the phases that allocate, read and free it) and
:class:`memflow.profile.opcost.OpCost` (FLOPs and bytes moved per phase).
Run under ``FakeTensorMode`` this needs no real memory, so models larger than
the host are costed the same way as small ones.

The traced step is a steady-state step (parameters and optimizer state
resident, gradients made in backward and dropped by
``zero_grad(set_to_none=True)``): a warm-up step runs first to make the
optimizer state, unless the caller already has it.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

from ..graph.program import StepProgram
from ..graph.record import (
    KIND_ACTIVATION,
    KIND_GRAD,
    KIND_INPUT_GRAD,
    KIND_OPTIMIZER,
    Buffer,
    Node,
    TaskGraph,
    carried_bytes,
)
from ..buckets import dtype_kind
from ..graph.actions import HostSwap, make_wrap
from ..graph.aliases import alias_reads, escaping_params, input_view_reads, replay_unsafe_nodes, written_params
from ..graph.casts import cast_only, low_reads
from ..graph.training import casts, grad_meta, unique_params
from ..kinds import MIN_SWAP_BYTES, RECOMPUTE, SWAP
from ..memory import BufferEvent, LiveBytes, gap_key, storages, told_gaps
from ..progress import detail
from .fakecache import warm_call
from .opcost import OpCost
from .optstep import single_step_rates
from .selective import selective_figures
from .selective_nodes import NodeWatch, node_figures
from .sendcopy import SendCopies

__all__ = ["trace_step", "node_state", "state_tensors", "OptPhase", "opt_phase_alone"]


@dataclass(frozen=True)
class OptPhase:
    """What a traced step's optimizer phase (phase 2n) adds to the record, none of which
    depends on the batch: the buffers the optimizer allocates (nbytes, free phase, uses, kind),
    the parameters whose gradients it reads, how far above the live bytes it starts from the
    step rises, and its op costs (FLOPs, bytes moved, ops). A later step of the same program
    and optimizer state, traced at another batch size, can skip ``optimizer.step()`` and take
    these (``trace_step(opt_phase=...)``): about a third of a fake GPT-2 step's tracing time."""

    buffers: tuple[tuple[int, int, frozenset, str], ...]
    reads: frozenset
    rise: int
    flops: float
    bytes_accessed: float
    ops: int


def _storage_key(t: torch.Tensor) -> int:
    sts = storages(t)
    return id(sts[0]) if sts else id(t)


def node_state(program: StepProgram, optimizer: torch.optim.Optimizer | None
               ) -> tuple[list[dict[str, Any]], dict[str, list[int]], dict[int, str]]:
    """Per node: the parameters it owns (the first node to read a shared one owns it) and
    their byte counts, plus every parameter it reads. Also the graph-level parameter table
    ``name -> [param bytes, grad bytes, optimizer bytes, owner node]`` and ``id(param) -> name``."""
    owner: dict[int, int] = {}
    key_name: dict[int, str] = {}
    table: dict[str, list[int]] = {}
    names_by_id: dict[int, str] = {}
    out = []
    handed = alias_reads(program)  # (parameters a node reads through views another node handed on)
    for k, mod in enumerate(program.modules()):
        call = program.calls[k]
        held = [(program.attrs[a], program.attr_value(a)) for a in call.arg_names if a in program.attrs]
        held += list(mod.named_parameters(remove_duplicate=False)) + list(mod.named_buffers(remove_duplicate=False))
        held += program.unread_of(k)  # held by the model all the same: state, no gradient
        names, reads, pbytes, pcount, gbytes, obytes = [], [], 0, 0, 0, 0
        for name, t in held:
            if not isinstance(t, torch.Tensor):
                continue
            key = _storage_key(t)
            if key in owner:
                if key_name[key] not in reads:
                    reads.append(key_name[key])
                continue
            owner[key] = k
            key_name[key] = name
            names.append(name)
            reads.append(name)
            nb = t.untyped_storage().nbytes()
            g = o = 0
            if isinstance(t, torch.nn.Parameter) and t.requires_grad:
                pcount += t.numel()
                g = t.numel() * t.element_size()
                if optimizer is not None:
                    for st in optimizer.state.get(t, {}).values():
                        if isinstance(st, torch.Tensor):
                            o += st.untyped_storage().nbytes()
                names_by_id[id(t)] = name
            pbytes, gbytes, obytes = pbytes + nb, gbytes + g, obytes + o
            table[name] = [nb, g, o, k, dtype_kind(t.dtype)]
        out.append(dict(param_names=names, read_params=reads, param_bytes=pbytes, param_count=pcount,
                        handed_params=sorted(program.attrs[a] for a in handed[k]),
                        grad_bytes=gbytes, optimizer_bytes=obytes))
    return out, table, names_by_id


def shared_param_ids(states: list[dict[str, Any]], names_by_id: dict[int, str]) -> set[int]:
    """``id()`` of the parameters more than one node reads, or a node reads through views another handed on
    (from :func:`node_state`'s ``states`` and ``names_by_id``): under ZeRO-3 held whole, their gradients added
    into across micro-batches (:func:`simulator.zero3.node_units`; one it holds whole for another reason is
    taken as a unit's here, its gradient made anew: over, not under)."""
    readers: dict[str, int] = {}
    for st in states:
        for k in st["read_params"]:
            readers[k] = readers.get(k, 0) + 1
        for k in st["handed_params"]:
            readers[k] = readers.get(k, 0) + 2
    return {i for i, name in names_by_id.items() if readers.get(name, 0) > 1}


def state_tensors(program: StepProgram, optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    ts: list[torch.Tensor] = []
    ts.extend(program.split.parameters())
    ts.extend(program.split.buffers())
    ts.extend(t for _, _, t in program.unread)
    for st in optimizer.state.values():
        ts.extend(v for v in st.values() if isinstance(v, torch.Tensor))
    return ts


def _cpu_swap_transients(program: StepProgram, inputs: list[torch.Tensor],
                         optimizer: torch.optim.Optimizer, shared: set[int]) -> tuple[list[int], list[int], list[int], list[int]]:
    """Per forward/backward phase, the transient (in-phase peak above the state and the buffers
    carried through the phase) of a forward/backward in which every node is swapped as the CPU
    executor swaps. Within a node's forward a saved tensor lives until its last use there, and
    in its backward each comes back only when asked for and dies after its use: neither phase's
    peak follows from phase-level liveness, so it is traced. Gradients are dropped afterwards.
    With it, the same less the parameter gradients each phase has made so far (a later micro-batch's
    backward: they are there already, as in the plain trace's ``steady`` figures); per forward phase,
    the transient had what it frees of earlier phases' buffers been held to its end, and those bytes
    (every saver swapped, a value dies in its last forward reader: a plan holding it on carries it)."""
    n = program.n
    state = state_tensors(program, optimizer)
    live = LiveBytes(record=True)
    live.track(state, kind="state")
    # (a copy of the batch the step alone holds, as the main trace's: counted to the end all the same; which
    # inputs it lets go before their phase's peak is the fifth figure)
    batch = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    batch_keys = {key: name for name, t in zip(program.placeholders, batch) if isinstance(t, torch.Tensor)
                  for key in live.track_kept([t])}
    live.follow_grads(shared)
    live.hold_old({p: p for p in range(n)})
    live.follow_frees()
    state_bytes = live.live
    swap = HostSwap(live, {t.untyped_storage().data_ptr() for t in state})
    swap.batch_inputs(batch)  # (as the executor: the batch stays on the device)
    made: set = set()

    def grad_made(prm):
        if n <= live.phase < 2 * n and id(prm) not in made and prm.grad is not None:
            made.add(id(prm))
            live.grad_made(sum(st.nbytes() for st in storages(prm.grad)), id(prm) in shared)

    params = unique_params(program.split)
    hooks = [prm.register_post_accumulate_grad_hook(grad_made) for prm in params if prm.requires_grad]
    try:
        with live:
            program.run_step(batch, on_phase=live.set_phase, wrap=make_wrap([SWAP] * n, swap), consume=True)
            live.set_phase(2 * n)
    finally:
        for h in hooks:
            h.remove()
    optimizer.zero_grad(set_to_none=True)
    evs = [ev for ev in live.events if ev.nbytes]
    carried = [ev.nbytes for ev in evs], [ev.alloc_phase for ev in evs], \
        [ev.free_phase if ev.free_phase >= 0 else 2 * n + 1 for ev in evs]
    freed = [sum(ev.nbytes for ev in evs if ev.alloc_phase < p == ev.free_phase) for p in range(n)]
    early = sorted(batch_keys[k] for k in live.early_frees() if k in batch_keys and live.freed_at[k] < 2 * n)
    gaps = told_gaps(evs, lambda ev: ev.views)  # (a storage read in views, told from the plain trace's)
    return (_transients(live, state_bytes, n, *carried)[:2 * n],
            _transients(live, state_bytes, n, *carried, peaks=live.phase_peak_steady)[:2 * n],
            _transients(live, state_bytes, n, *carried, peaks=live.phase_peak_steady_shared)[:2 * n],
            _transients(live, state_bytes, n, *carried, peaks=live.phase_peak_held_f)[:n], freed, early, gaps)


def _checkpointed_fwd_transients(program: StepProgram, inputs: list[torch.Tensor],
                                 optimizer: torch.optim.Optimizer) -> list[int]:
    """Per forward phase, the transient (in-phase peak above the state and the buffers carried
    through the phase) of a forward in which every node runs under the recompute action's checkpoint:
    it keeps no saved tensor, so what the kept forward saves dies inside it (a block's forward peak
    there is a fraction of the kept one's). Forward only: its values are dropped after it."""
    n = program.n
    live = LiveBytes(record=True, call=warm_call)
    live.track(state_tensors(program, optimizer) + list(inputs), kind="state")
    state_bytes = live.live
    wrap = make_wrap([RECOMPUTE] * n, None, preserve_rng_state=False)
    with live:
        torch.clear_autocast_cache()
        env = program.initial_env(inputs)
        states = []
        for k in range(n):
            live.set_phase(k)
            states.append(program.forward_node(k, env, wrap=wrap))
            program.drop_dead(env, k)
        live.set_phase(n)
        states.clear()
        env.clear()
        torch.clear_autocast_cache()
    evs = [ev for ev in live.events if ev.nbytes]
    return _transients(live, state_bytes, n, [ev.nbytes for ev in evs], [ev.alloc_phase for ev in evs],
                       [ev.free_phase if ev.free_phase >= 0 else 2 * n + 1 for ev in evs])[:n]


def _transients(live: LiveBytes, state_bytes: int, n: int, nbytes: list, alloc: list, free: list,
                peaks: dict | None = None) -> list[int]:
    """Per phase 0..2n, the traced in-phase peak (``peaks``: other per-phase peaks, e.g. each phase's
    peak up to its last saved tensor) above the state and the buffers carried through it."""
    carried = carried_bytes(2 * n + 1, *(np.array(x, dtype=np.int64) for x in (nbytes, alloc, free)))
    peaks = live.phase_peak if peaks is None else peaks
    return [max(0, peaks.get(p, 0) - state_bytes - int(carried[p])) for p in range(2 * n + 1)]


def _watch_casts(program: StepProgram, inputs: list, dtype: str, live: LiveBytes, names_by_id: dict) -> dict:
    """Under autocast: have ``live`` tag the bf16 casts of the parameters a ZeRO-3 unit would gather in
    bf16 (:mod:`memflow.graph.casts`, found by one forward: under the fake mode the step runs in, or a
    fake mode of its own on real tensors); the keys given it (``id(storage) -> name``)."""
    if not casts(dtype):
        return {}
    params = unique_params(program.split)
    ids = getattr(program, "_cast_only", {}).get(dtype)  # (the same at every batch size a program is traced at)
    if ids is None:
        fake = not any(isinstance(p, FakeTensor) for p in params[:1])
        dev = params[0].device.type if params else "cpu"
        ids = cast_only(program, inputs, dtype, dev, fake=fake)
        program._cast_only = {**getattr(program, "_cast_only", {}), dtype: ids}
    low = {i for r in low_reads(program, ids).values() for _, i in r}
    by_id = {id(p): p for p in params}
    keys = {id(st): names_by_id[i] for i in low if i in by_id and i in names_by_id for st in storages(by_id[i])}
    if keys:
        live.watch_casts(keys)
    return keys


class _OptWindow:
    """Watches the optimizer step of a traced step (inside phase 2n): the live bytes it starts
    from, its own peak, the buffers it allocates and the buffers it reads."""

    def __init__(self, live: LiveBytes, cost: OpCost, phase: int):
        self.live, self.cost, self.phase = live, cost, phase
        self.start = self.top = 0
        self.costs = (0.0, 0.0, 0)
        self.first = 0
        self.read_before: set = set()

    @contextlib.contextmanager
    def around(self):
        live, p = self.live, self.phase
        self.start = live.live
        self.first = len(live.events)
        self.read_before = {id(ev) for ev in live.events if p in ev.uses}
        before = live.phase_peak.get(p, 0)
        live.phase_peak[p] = live.live  # the step's own peak, from here
        c = self.cost
        was = (c.flops.get(p, 0.0), c.bytes.get(p, 0.0), c.ops.get(p, 0))
        try:
            yield
        finally:
            self.top = live.phase_peak[p]
            live.phase_peak[p] = max(before, self.top)
            self.costs = (c.flops.get(p, 0.0) - was[0], c.bytes.get(p, 0.0) - was[1], c.ops.get(p, 0) - was[2])

    def record(self, grad_param: dict) -> OptPhase | None:
        """The phase as an :class:`OptPhase`, or None if the step read a buffer that is not a
        gradient (then it may depend on the batch)."""
        p, events = self.phase, self.live.events
        reads = set()
        for ev in events[:self.first]:
            if p in ev.uses and id(ev) not in self.read_before:
                name = grad_param.get(id(ev))
                if not name:
                    return None
                reads.add(name)
        bufs = tuple((ev.nbytes, ev.free_phase, frozenset(ev.uses), ev.kind) for ev in events[self.first:])
        flops, moved, ops = self.costs
        return OptPhase(buffers=bufs, reads=frozenset(reads), rise=self.top - self.start, flops=flops,
                        bytes_accessed=moved, ops=ops)

    def splice(self, rec: OptPhase, grad_param: dict) -> None:
        """Give a step traced without ``optimizer.step()`` (inside :meth:`around`) the optimizer
        phase ``rec`` recorded from a full one."""
        live, cost, p = self.live, self.cost, self.phase
        for ev in live.events:
            if grad_param.get(id(ev)) in rec.reads:
                ev.uses.add(p)
        for nbytes, free, uses, kind in rec.buffers:  # the optimizer's buffers were the last a full step made
            ev = BufferEvent(nbytes=nbytes, alloc_phase=p, kind=kind)
            ev.free_phase = free
            ev.uses.update(uses)
            live.events.append(ev)
        live.phase_peak[p] = max(live.phase_peak.get(p, 0), self.start + rec.rise)
        live.peak = max(live.peak, live.phase_peak[p])
        cost.flops[p] += rec.flops
        cost.bytes[p] += rec.bytes_accessed
        cost.ops[p] += rec.ops


def opt_phase_alone(params: list, optimizer: torch.optim.Optimizer, layouts: dict, *, phase: int,
                    key_of: dict, state: list) -> OptPhase | None:
    """The optimizer phase of a steady-state step recorded without tracing the step: each
    parameter in ``layouts`` gets a gradient of that layout (:func:`grad_meta`), as a traced
    backward leaves them, and the optimizer steps once in phase ``phase`` under the counters
    :func:`trace_step` uses. ``state``: the tensors a traced step counts as state (parameters,
    buffers, optimizer state). ``reads`` name parameters by ``key_of[id(param)]``. It equals
    the phase a traced step records when its backward leaves gradients of those layouts (the
    caller checks that it did)."""
    cost = OpCost()
    live = LiveBytes(record=True, after=cost.count, call=warm_call)
    live.track(state, kind="state")
    window = _OptWindow(live, cost, phase)
    grad_key = {}
    with live:
        # the gradients come in the phase before, as from a backward (setting one reads it: a use)
        live.set_phase(phase - 1)
        cost.phase = phase - 1
        for prm in params:
            lay = layouts.get(prm)
            if lay is None:
                continue
            shape, stride, _offset, dtype, device, _layout = lay
            prm.grad = torch.empty_strided(shape, stride, dtype=dtype, device=device)
            ev = live.event_of(prm.grad)
            if ev is not None:
                grad_key[id(ev)] = key_of[id(prm)]
        live.set_phase(phase)
        cost.phase = phase
        with window.around():
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        live.set_phase(phase + 1)
    return window.record(grad_key)


def _data_reads(call, inputs: dict) -> list[str]:
    """The batch inputs a node reads as data: a symbolic-batch program also hands a node an
    input only to read its size (the same node of a fixed-size program does not read it)."""
    phs = [x for x in call.module.graph.nodes if x.op == "placeholder"]
    out = []
    for i, name in enumerate(call.arg_names):
        if name not in inputs:
            continue
        users = phs[i].users if len(phs) == len(call.arg_names) else [None]
        if any(u is None or not isinstance(u.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool))
               for u in users):
            out.append(name)
    return out


def _selective(program: StepProgram, inputs: list, optimizer: torch.optim.Optimizer, cost: OpCost,
               watch: NodeWatch | None, how: str, autocast: bool, cast_keys: dict | None = None) -> list[dict]:
    """The nodes' ``sel_*`` figures (see :func:`trace_step`'s ``selective``); ``low_sel_*`` too where
    ``cast_keys`` (:func:`_watch_casts`) and the figures are had node by node."""
    if not how:
        return [{}] * program.n
    state = state_tensors(program, optimizer)
    if watch is not None:
        try:
            return node_figures(watch, inputs, state, cost, autocast=autocast, cast_keys=cast_keys)
        except Exception:  # noqa: BLE001 - NotByNode, or an op that will not run alone: the traced step has them
            pass
        torch.clear_autocast_cache()
        for p in program.split.parameters():
            p.grad = None
    return selective_figures(program, inputs, optimizer, state, cost, cast_keys)


def _note_phase(e: BaseException, where: str) -> None:
    """Tell ``e`` the phase the trace failed in (``memflow_phase``), where it takes attributes."""
    try:
        e.memflow_phase = where
    except (AttributeError, TypeError):  # (an exception type with slots: the line names no node)
        pass


def trace_step(
    program: StepProgram,
    inputs: list[torch.Tensor],
    optimizer: torch.optim.Optimizer,
    names: list[str],
    module_paths: list[str],
    *,
    model_name: str,
    batch_size: int,
    dtype: str = "fp32",
    state_ready: bool = False,
    warm_up: bool = True,
    grads: dict | None = None,
    cpu_swap: bool = False,
    opt_phase: OptPhase | None = None,
    opt_out: list | None = None,
    selective: str = "nodes",
) -> TaskGraph:
    """Run a warm-up step and a traced step; return the TaskGraph (no times yet).

    The warm-up step makes the optimizer state, so that the traced step is a
    steady-state step. ``state_ready``: the optimizer's state already exists (it
    has stepped these parameters before, at any batch size), so the warm-up runs
    forward and backward only, or not at all with ``warm_up=False``.

    The traced step runs each op through :func:`memflow.profile.fakecache.warm_call`,
    so under ``FakeTensorMode`` it meets the cache a step at its own shapes
    leaves behind whether or not one ran before it. Under autocast a warm-up
    also fills autocast's cache of parameter casts, which the traced step then
    reads instead of casting again: there the caller keeps ``warm_up``.
    ``grads``: a dict that receives, per parameter with a gradient at the end of
    the backward, that gradient's metadata (:func:`grad_meta`).
    ``opt_phase``: the optimizer phase of an earlier traced step of this program with this
    optimizer state (:class:`OptPhase`): the step is traced without ``optimizer.step()``
    and the record takes that phase from it. ``opt_out``: a list that receives this step's
    own :class:`OptPhase` (nothing when the phase cannot be told apart from the batch's
    buffers, e.g. the optimizer read a buffer that is not a gradient). ``selective``: how the
    nodes' ``sel_*`` figures are had: ``"step"``, a traced forward and backward with every node
    under the ``selective`` action (:func:`memflow.profile.selective.selective_figures`);
    ``"nodes"``, the same figures from one run per distinct node
    (:func:`memflow.profile.selective_nodes.node_figures`), or the traced step where that cannot
    be; ``""``, none."""
    n = program.n
    params = unique_params(program.split)

    def step(on_phase=None, optimize=True, around_opt=None, watch=None, batch=None):
        program.run_step(inputs if batch is None else batch, on_phase=on_phase, watch=watch, consume=batch is not None)
        if on_phase:
            on_phase(2 * n)
        with around_opt() if around_opt else contextlib.nullcontext():
            if optimize:
                optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def phase_name(p: int) -> str:
        return names[p] if p < n else f"{names[2 * n - 1 - p]} (backward)" if p < 2 * n else "the optimizer step"

    if warm_up or not state_ready:
        at = [0]
        try:
            step(on_phase=lambda p: at.__setitem__(0, p),
                 optimize=not state_ready)  # warm-up: creates the optimizer state
        except Exception as e:  # (where it failed, for memflow.profile.build.trace_failed's line)
            _note_phase(e, phase_name(at[0]))
            raise
    cost = OpCost()
    live = LiveBytes(record=True, after=cost.count, call=warm_call)  # one dispatch mode counts both
    live.track(state_tensors(program, optimizer), kind="state")
    # the traced step reads a copy of the batch held by the step alone, as the executor's (counted to the
    # end all the same): when each input is let go is what the executor's copy does
    batch = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    batch_keys = {key: name for name, t in zip(program.placeholders, batch) if isinstance(t, torch.Tensor)
                  for key in live.track_kept([t])}
    live.hold_saved(MIN_SWAP_BYTES)  # (each backward's peak with the saved tensors it frees held to its end too)
    live.hold_inputs(n)  # (... and with what it frees of its node's inputs held to its end: a recompute's checkpoint)
    live.hold_old({p: p for p in range(n)})  # (each forward's peak with what it frees of earlier phases' buffers held)
    states, _, names_by_id = node_state(program, optimizer)  # (node_state scans the program: once)
    shared = shared_param_ids(states, names_by_id)
    live.follow_grads(shared)  # (each backward's peak as a later micro-batch's, its gradients there already)
    live.follow_added()  # (... and with the gradients it adds into one an earlier phase made held instead)
    live.follow_frees()  # (... and with each buffer made before it that it frees smaller: a received slice)
    live.follow_reads()  # (... and with each buffer made before it that it reads last and keeps, let go after)
    state_bytes = live.live
    grad_events = []
    cast_keys = _watch_casts(program, inputs, dtype, live, names_by_id)
    cast_names = set(cast_keys.values())
    opt = _OptWindow(live, cost, 2 * n)

    def on_phase(p: int) -> None:
        detail(f"tracing {phase_name(p)}, phase {p + 1}/{2 * n + 1}")
        if p == 2 * n:  # end of backward: mark parameter gradients
            gradless.extend(names_by_id[id(prm)] for prm in params
                            if prm.grad is None and prm.requires_grad and id(prm) in names_by_id)
            for prm in params:
                if prm.grad is not None:
                    if grads is not None:
                        grads[prm] = grad_meta(prm.grad)
                    ev = live.event_of(prm.grad)
                    if ev is not None:
                        grad_events.append((ev, names_by_id.get(id(prm), "")))
        live.set_phase(p)
        starts[p] = live.live
        cost.phase = p

    gradless: list[str] = []  # trainable parameters the step gives no gradient (an unread pooler)
    saves: dict[int, int] = {}
    saved_inputs: dict[str, set[int]] = {}  # batch input -> the nodes whose forward saved it
    starts: dict[int, int] = {}  # per backward phase, the live bytes as it starts
    pre: dict[int, int] = {}  # ... and what it has made when it first unpacks a saved tensor

    def unpacked(t):  # (in a recompute, the replay runs here)
        p = live.phase
        if n <= p < 2 * n and p not in pre:
            pre[p] = max(0, live.live - starts.get(p, live.live))
        live.unpacked()
        return t

    def saved(t):  # a tensor autograd saves in a forward: a recompute's replay runs up to the last one
        if live.phase < n:
            live.mark()
            saves[live.phase] = saves.get(live.phase, 0) + 1
            if isinstance(t, torch.Tensor):
                ev = live.event_of(t)
                if ev is not None:
                    ev.packed = True
                for st in storages(t):  # (a batch input the node's autograd holds to its backward)
                    if id(st) in batch_keys:
                        saved_inputs.setdefault(batch_keys[id(st)], set()).add(live.phase)
        # (detached: autograd hands the hook a saved output with its own grad_fn; held as is, it makes a cycle
        # that keeps a dead branch's saved tensors to the next garbage collection, RWKV's final recurrent
        # state to the step's end, where the executor's kept nodes, with no hook, let them go at once)
        return t.detach() if isinstance(t, torch.Tensor) else t

    watch = NodeWatch(program, live) if selective == "nodes" else None
    sends = SendCopies(program, live, watch, inputs=set(batch_keys))  # (what a cut's sends copy: memory no traced phase holds)
    made: dict = {}  # id(parameter) -> the phase that made its gradient

    def grad_made(prm):  # a parameter's gradient set (made, the first time in the step): a later micro-batch adds into it
        if n <= live.phase < 2 * n and prm.grad is not None:
            if id(prm) not in made:
                made[id(prm)] = live.phase
                live.grad_made(sum(st.nbytes() for st in storages(prm.grad)), id(prm) in shared)
            elif made[id(prm)] != live.phase:  # (added into one an earlier phase made: a tied weight's)
                live.grad_added(sum(st.nbytes() for st in storages(prm.grad)))

    hooks = [prm.register_post_accumulate_grad_hook(grad_made) for prm in params if prm.requires_grad]
    try:
        with live, torch.autograd.graph.saved_tensors_hooks(saved, unpacked):
            step(on_phase, optimize=opt_phase is None, around_opt=opt.around, watch=sends, batch=batch)
            live.set_phase(2 * n + 1)
    except Exception as e:  # (where it failed, for memflow.profile.build.trace_failed's line)
        _note_phase(e, phase_name(live.phase))
        raise
    finally:
        for h in hooks:
            h.remove()
    grad_param = {}
    for ev, pname in grad_events:
        ev.kind = KIND_GRAD
        grad_param[id(ev)] = pname
    if opt_phase is not None:
        opt.splice(opt_phase, grad_param)
    elif opt_out is not None:
        rec = opt.record(grad_param)
        if rec is not None:
            opt_out.append(rec)

    buffers = []
    buffer_ev: list[int] = []  # (id of each buffer's event)
    copied = sends.by_storage()
    for ev in live.events:
        free = ev.free_phase if ev.free_phase >= 0 else 2 * n + 1
        kind = ev.kind
        if not kind:
            if ev.alloc_phase < n:
                kind = KIND_ACTIVATION
            elif ev.alloc_phase < 2 * n:
                kind = KIND_INPUT_GRAD
            else:
                kind = KIND_OPTIMIZER
        if ev.nbytes == 0:
            continue
        buffers.append(Buffer(nbytes=ev.nbytes, alloc_phase=ev.alloc_phase, free_phase=free, kind=kind,
                              uses=sorted(ev.uses), param=grad_param.get(id(ev), ""),
                              views=ev.partial_views(), cast=ev.cast, packed=ev.packed,
                              copies=copied.get(id(ev), []), free_gap=ev.free_gap if ev.views else -1,
                              read_gaps=sorted([p, g] for p, g in ev.read_gaps.items()),
                              steady_read_gaps=sorted([p, g] for p, g in ev.steady_read_gaps.items())))
        buffer_ev.append(id(ev))

    # transient bytes per phase: measured in-phase peak above state + carried buffers
    carried = [b.nbytes for b in buffers], [b.alloc_phase for b in buffers], [b.free_phase for b in buffers]
    transient = _transients(live, state_bytes, n, *carried)
    replayed = _transients(live, state_bytes, n, *carried, peaks=live.phase_mark)
    held = _transients(live, state_bytes, n, *carried, peaks=live.phase_peak_held)
    held_in = _transients(live, state_bytes, n, *carried, peaks=live.phase_peak_held_in)
    held_f = _transients(live, state_bytes, n, *carried, peaks=live.phase_peak_held_f)
    steady = _transients(live, state_bytes, n, *carried, peaks=live.phase_peak_steady)
    steady_sh = _transients(live, state_bytes, n, *carried, peaks=live.phase_peak_steady_shared)
    first = _transients(live, state_bytes, n, *carried, peaks=live.phase_peak_first)
    low = dict(low_fwd_transient_bytes=-1, low_bwd_transient_bytes=-1, low_rec_fwd_transient_bytes=-1,
               low_held_bwd_transient_bytes=-1, low_rec_held_bwd_transient_bytes=-1)
    lows = [low] * n
    if cast_names:  # the same without the casts of the parameters a ZeRO-3 unit gathers in bf16
        nc = [(b.nbytes, b.alloc_phase, b.free_phase) for b in buffers if not b.cast]
        carried_nc = [x[0] for x in nc], [x[1] for x in nc], [x[2] for x in nc]
        t_nc = _transients(live, state_bytes, n, *carried_nc, peaks=live.phase_peak_nc)
        r_nc = _transients(live, state_bytes, n, *carried_nc, peaks=live.phase_mark_nc)
        h_nc = _transients(live, state_bytes, n, *carried_nc, peaks=live.phase_peak_held_nc)
        hi_nc = _transients(live, state_bytes, n, *carried_nc, peaks=live.phase_peak_held_in_nc)
        own = {(b.alloc_phase, b.free_phase) for b in buffers if b.cast}
        lows = [dict(low_fwd_transient_bytes=t_nc[k], low_bwd_transient_bytes=t_nc[2 * n - 1 - k],
                     low_rec_fwd_transient_bytes=min(r_nc[k], t_nc[k]),
                     low_held_bwd_transient_bytes=max(h_nc[2 * n - 1 - k], t_nc[2 * n - 1 - k]),
                     low_rec_held_bwd_transient_bytes=max(hi_nc[2 * n - 1 - k], t_nc[2 * n - 1 - k]))
                if any(a == k for a, _ in own) else low for k in range(n)]

    swapped, swapped_steady, swapped_steady_sh, swapped_held_f, swapped_freed, swapped_early, swap_gaps = (
        _cpu_swap_transients(program, inputs, optimizer, shared) if cpu_swap
        else ([-1] * (2 * n),) * 3 + ([-1] * n,) * 2 + ([], {}))
    for b in buffers:  # (the all-swapped trace's figure for each storage read in views: Buffer.swap_free_gap)
        if b.views:
            b.swap_free_gap = swap_gaps.get(gap_key(b.alloc_phase, b.free_phase, b.nbytes, b.uses), -1)
    # (fp32 only: under bf16 autocast a recomputed loss head's forward ran 1,728 bytes above its traced figure on
    # the CPU, not located; there the kept forward's figure stays, an upper bound)
    ck = _checkpointed_fwd_transients(program, inputs, optimizer) if not casts(dtype) else [-1] * n
    sel = _selective(program, inputs, optimizer, cost, watch, selective, autocast=casts(dtype), cast_keys=cast_keys)
    # (a selective node's forward, under autocast too, is priced at its traced transient: the kept forward's
    # figure, taken as a floor before, counts the saved tensors its policy does not hold: GPT-2's block 400 KiB;
    # but the loss head's under autocast, whose traced figure is 128-1,152 bytes under the fake run's on BART,
    # DistilBERT, Mamba: not located, as ck's above; and where its traced figure is above the kept one, that:
    # a selective GPT-2 head in bf16 holds its logits' matmul output beside the loss, 114 MiB over the kept)
    # (the selective figures' own gap for each storage read in views that a backward frees: Buffer.sel_free_gap;
    # node by node, the trace's record of each gradient handed in; from the traced step, told apart as swap's)
    sel_gaps, sel_gap_keys = {}, {}
    sel = [dict(f) for f in sel]
    for f in sel:
        sel_gaps.update(f.pop("_sel_gaps", {}))
        sel_gap_keys.update(f.pop("_sel_gap_keys", {}))
    for b, evid in zip(buffers, buffer_ev):
        if b.views:
            b.sel_free_gap = sel_gaps.get(evid, sel_gap_keys.get(gap_key(b.alloc_phase, b.free_phase, b.nbytes,
                                                                         b.uses), -1))
    if casts(dtype) and sel[n - 1]:
        head = sel[n - 1]
        sel[n - 1] = {**head, "sel_fwd_transient_bytes": max(head["sel_fwd_transient_bytes"], transient[n - 1])}
        if head.get("low_sel_fwd_transient_bytes", -1) >= 0:
            sel[n - 1]["low_sel_fwd_transient_bytes"] = max(head["low_sel_fwd_transient_bytes"],
                                                            lows[n - 1]["low_fwd_transient_bytes"])
    states, param_table, names_by_id = node_state(program, optimizer)
    input_bytes = sum(st.nbytes() for st in {id(s): s for t in inputs for s in storages(t)}.values())
    input_of = {name: sum(s.nbytes() for s in storages(t)) for name, t in zip(program.placeholders, inputs)
                if isinstance(t, torch.Tensor)}
    viewed = input_view_reads(program)  # (inputs a node reads through views another node made: received)
    nodes = []
    for k in range(n):
        fp, bp = k, 2 * n - 1 - k
        saved = sum(b.nbytes for b in buffers if b.alloc_phase == fp and b.free_phase == bp)
        out_b = sum(b.nbytes for b in buffers if b.alloc_phase == fp and any(u != fp and u < n for u in b.uses))
        nodes.append(Node(
            index=k, name=names[k], module_path=module_paths[k], op_count=cost.ops.get(fp, 0),
            fwd_flops=cost.flops.get(fp, 0.0), bwd_flops=cost.flops.get(bp, 0.0),
            fwd_bytes_accessed=cost.bytes.get(fp, 0.0), bwd_bytes_accessed=cost.bytes.get(bp, 0.0),
            out_bytes=out_b, saved_bytes=saved,
            fwd_transient_bytes=transient[fp], bwd_transient_bytes=transient[bp],
            rec_fwd_transient_bytes=min(replayed[fp], transient[fp]), saved_tensors=saves.get(fp, 0),
            ck_fwd_transient_bytes=ck[fp],
            bwd_pre_replay_bytes=pre.get(bp, 0),
            cpu_swap_fwd_transient_bytes=swapped[fp], cpu_swap_bwd_transient_bytes=swapped[bp],
            cpu_swap_steady_bwd_transient_bytes=min(swapped_steady[bp], swapped[bp]),
            cpu_swap_z3_steady_bwd_transient_bytes=min(swapped_steady_sh[bp], swapped[bp]),
            cpu_swap_held_fwd_transient_bytes=max(swapped_held_f[fp], swapped[fp]) if swapped[fp] >= 0 else -1,
            cpu_swap_fwd_freed_bytes=swapped_freed[fp],
            held_bwd_transient_bytes=max(held[bp], transient[bp]),
            rec_held_bwd_transient_bytes=max(held_in[bp], transient[bp]),
            held_fwd_transient_bytes=max(held_f[fp], transient[fp]),
            steady_bwd_transient_bytes=min(steady[bp], transient[bp]),
            z3_steady_bwd_transient_bytes=min(steady_sh[bp], transient[bp]),
            first_bwd_transient_bytes=max(first[bp], transient[bp]),
            read_inputs=sorted(set(_data_reads(program.calls[k], input_of)) | viewed[k]),
            **states[k], **sel[k], **lows[k],
        ))
    graph = TaskGraph(
        model_name=model_name, batch_size=batch_size, dtype=dtype, nodes=nodes, buffers=buffers,
        optimizer=type(optimizer).__name__, opt_transient_bytes=transient[2 * n], input_bytes=input_bytes,
        inputs=input_of, params=param_table, cast_params=sorted(cast_names),
        input_free={batch_keys[k]: p for k, p in live.freed_at.items() if k in batch_keys and p < 2 * n},
        input_early=sorted(batch_keys[k] for k in live.early_frees() if k in batch_keys and live.freed_at[k] < 2 * n),
        input_early_swapped=swapped_early,
        input_holders={name: sorted(saved_inputs.get(name, ())) for name in input_of
                       if not any(name in v for v in viewed)},
        whole_params=sorted(names_by_id[i] for i in escaping_params(program) if i in names_by_id),
        bwd_send_copies=sends.bwd_list(),
        fwd_input_send_copies=sends.input_list(),
    )
    # trainable parameters the backward gives no gradient: no data-parallel bucket holds them
    graph.meta["gradless_params"] = sorted(set(gradless))
    # trainable parameters changed in place in the forward: one micro-batch in flight at a time
    graph.meta["written_params"] = sorted(names_by_id[i] for i in written_params(program) if i in names_by_id)
    # plain attributes the forward set to tensors (self.mem = h.detach()): the planned step never updates them
    graph.meta["carried_attrs"] = list(program.carried)
    graph.meta["routed"] = list(program.routed)
    # nodes whose replay would differ from their forward (spectral norm's power iteration): kept, never recomputed
    graph.meta["replay_unsafe"] = replay_unsafe_nodes(program)
    # nodes no backward runs through (the loss reads nothing they make): recomputed, they never replay
    # (StageLayout.dead: their backward phase priced without the replay's transient or time)
    graph.meta["no_backward"] = sorted(program.no_backward)
    # the record's state must be what the tracer counted, or the replay drifts
    graph.meta["traced_state_bytes"] = state_bytes
    graph.meta["traced_peak_bytes"] = live.peak
    # how the optimizer steps its tensors: "foreach" / "fused" (temporaries for a whole group at once),
    # "single" (one tensor at a time), or "default" (torch picks: foreach on CUDA, one at a time on the CPU)
    d = getattr(optimizer, "defaults", {}) or {}
    graph.meta["optimizer_impl"] = ("fused" if d.get("fused") else "foreach" if d.get("foreach")
                                    else "single" if d.get("foreach") is False else "default")
    if graph.meta["optimizer_impl"] in ("single", "default"):  # (stepped one tensor at a time somewhere)
        rates = single_step_rates(optimizer)
        if rates is not None:
            graph.meta["opt_step_rates"] = rates
            # the order it steps the parameters in (the model's, as the executor's stages do)
            graph.meta["opt_order"] = [names_by_id[id(p)] for grp in optimizer.param_groups for p in grp["params"]
                                       if id(p) in names_by_id]
    graph.meta["opt_flops"] = cost.flops.get(2 * n, 0.0)
    graph.meta["opt_bytes_accessed"] = cost.bytes.get(2 * n, 0.0)
    return graph
