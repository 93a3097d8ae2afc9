"""The simulator: ``simulate(graph, strategy, cluster) -> SimResult``.

Per device (rank ``r`` runs stage ``r // dp``) three streams — compute,
device↔device communication, host↔device copies. Stage figures come from
:mod:`simulator.stage` (cached per node range, actions and options), the
schedule's timing from :mod:`simulator.pipeline`; data-parallel gradient
all-reduce runs in buckets on the comm stream as the last micro-batch's
backward finishes; the step ends when the last all-reduce and the optimizer
step finish.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from memflow.graph.record import TaskGraph
from memflow.schedule import inflight
from memflow.kinds import SHARD_GRADIENTS, SHARD_NONE, SHARD_PARAMETERS, replay_safe
from memflow.strategy import ACTIONS, SWAP, Strategy
from memflow.errors import StrategyError
from memflow.units import format_bytes

from memflow.buckets import element_size, grad_buckets
from .pipeline import run_pipeline
from .zero3 import host_bytes
from .result import Evaluation, SimResult, curve_arrays
from .layout import StageLayout, build_layout, state_counter, state_rate
from .stage import StageEval, StageModel, stage_peak
from .lowcast import low_bytes, low_view
from .window import BufferWindow
from .zero3 import node_units, zero3_facts
from .optstep import step_temps
from .hostopt import HOST_MEM_BANDWIDTH, HOST_TENSOR_S, host_step_s  # noqa: F401 (re-exported)
from .tp import expand_devices, with_tp_comm

__all__ = ["Simulator", "simulate", "StageSpec", "StrategyShape", "BUCKET_BYTES", "HOST_MEM_BANDWIDTH",
           "HOST_TENSOR_S"]

BUCKET_BYTES = 25 * 2**20  # gradient all-reduce bucket cap (bytes), as DDP's 25 MB default and the executor's
SHAPE_CACHE_SIZE = 4096  # StrategyShapes kept (a few KiB each; rebuilt on a miss for about one stage evaluation's cost)


_ACTION_SET = frozenset(ACTIONS)


@dataclass(eq=False)
class StageSpec:
    """Stage ``[a, b)``'s action-independent facts on the simulator's cluster (built once per node
    range: :meth:`Simulator.stage`)."""

    layout: StageLayout
    model: StageModel  # evaluates the layout under actions (keeps its all-keep figures)
    params: int  # bytes of the stage's parameters (replicas of shared ones included)
    grads: int  # of their gradients
    optimizer: int  # of their optimizer state
    buckets: list  # gradient all-reduce buckets in order: (local node after whose backward it is reduced, bytes)
    opt_s: float  # seconds of the (unsharded, on-device) optimizer step
    tensors: int = 0  # parameter tensors its optimizer steps one by one on the host (optimizer on the host)
    units: int = 0  # ZeRO-3 shards it steps on the host (parameters on the host: one per unit part)


@dataclass(eq=False)
class StrategyShape:
    """What combining a strategy's stages needs besides their actions: mesh, stage ranges and
    facts, options, in-flight micro-batches, transfers, ZeRO-1 broadcasts, all-reduce buckets
    and host-memory shares (:meth:`Simulator.shape`; cached per simulator by everything but the
    actions)."""

    pp: int
    dp: int
    m: int  # micro-batches
    sched: str
    ranges: list
    stages: list  # per stage: StageSpec
    shard: list  # per stage: its sharding level (memflow.kinds.Sharding; none without data parallelism)
    ohost: list  # per stage: bool(optimizer_on_host)
    inflight: list  # per stage: micro-batches in flight (memflow.schedule.inflight)
    cf: list  # per cut: activation transfer (s)
    cb: list  # per cut: gradient transfer (s)
    pipe_key: tuple  # (cf, cb, m, schedule): with the op times, the pipeline timing's memo key
    ag: list  # per stage: ZeRO-1 parameter broadcast after the step (s)
    lfac: list  # per stage: all-reduce latency term per bucket (s)
    buckets: list  # per stage: (local node completing it, bytes-term seconds, bytes) per all-reduce bucket
    host_opt: list  # per stage: host bytes per device of an optimizer state kept on the host
    host_share: tuple  # per stage: ((machine, devices of the stage on it), ...)
    comm: list  # per stage: ZeRO-3's dp ring (bandwidth, latency, gloo) for its per-node collectives, else None
    phost: list = ()  # per stage: its ZeRO-3 units' shards in host memory (Strategy.params_host)
    prefetch: int = 1  # how many nodes ahead a swapped node's copy back starts (Strategy.prefetch; 1 on the CPU)


@dataclass
class _Stages:
    """Per-strategy intermediate results (what evaluate_delta re-uses): per stage its cache
    key, StageEval, host-link bandwidth, and the figures combined from them."""

    shape: StrategyShape
    keys: list
    evals: list
    bw: list
    peaks: list  # bytes per device
    opt_s: list  # optimizer step (s)
    host_b: list  # host bytes per device

    @property
    def ranges(self) -> list:
        return self.shape.ranges

    def copy(self, bw: list) -> "_Stages":
        return _Stages(self.shape, list(self.keys), list(self.evals), bw, list(self.peaks), list(self.opt_s),
                       list(self.host_b))


def _over(used: float, cap: float) -> str:
    """``"<used> of <capacity>"`` in a unit that tells the two apart (bytes where rounding would not)."""
    a, b = format_bytes(used), format_bytes(cap)
    return f"{a} of {b}" if a != b else f"{int(used):,} B of {int(cap):,} B"


def _breakdown(ev: StageEval, k: int, m: int, ms: int, inp: int, rank: tuple | None) -> dict:
    """What holds the peak bytes of a stage of ``ms`` nodes with figures ``ev`` (``k`` of ``m``
    micro-batches in flight, ``inp`` bytes of batch inputs per micro-batch; ``rank``: one of
    ``ev.ranks``, or None), by kind; the parts sum to its :func:`stage_peak`."""
    _, which = stage_peak(ev, k, m, rank)
    opt = ev.optimizer if rank is None else rank[1]
    cut = 0
    if which == "OPT":
        ph, others, stepv = 2 * ms, 0, ev.step[2 * ms]
    elif which == "F0":
        ph, others, stepv = ev.argF0, 0, ev.step[ev.argF0]
    elif which == "B0":
        ph, others, stepv = ev.argB0, k - 1, ev.step[ev.argB0]
    elif which in ("Fwarm", "Fsteady"):
        ph, others = ev.argF, k - 1
        stepv = ev.S_fwd if which == "Fwarm" else ev.S_after
    elif which == "SYNC":  # a bucket's flat copy beside what is live then (its bytes: transient)
        _, _, _, q1, qN, flat = max(ev.sync_points, key=lambda pt: pt[1] if m == 1 else pt[2])
        ph, others = (q1 if m == 1 else qN), 0
        stepv = ev.step[ph] if m == 1 and ph < 2 * ms else ev.S_after
        if ph == 2 * ms:  # after the backward: the gradients and the copy
            return {"params": ev.params, "grads": stepv, "optimizer": opt, "activations": 0,
                    "inflight_microbatches": 0, "swap_buffers": 0, "transient": flat, "phase": which}
    else:  # (a later micro-batch's backward: the gradients its phase makes are there already, in S_after)
        ph, others, stepv = ev.argB if ev.maxBs < 0 else ev.argBs, (k - 1 if m > k else k - 2), ev.S_after
        cut = 0 if ev.maxBs < 0 else ev.cutBs
    trans = ev.trans[ph] - cut
    if which == "SYNC":
        trans += flat
    elif which == "OPT" and rank is not None:
        trans = rank[2] - stepv
    sw = ev.swap_live[ph]
    return {"params": ev.params, "grads": stepv, "optimizer": opt, "activations": ev.carried[ph] - sw + inp,
            "inflight_microbatches": others * ev.R, "swap_buffers": sw, "transient": trans, "phase": which}


class Simulator:
    """Repeated evaluation of strategies for one graph on one cluster.

    ``evaluate(strategy)`` is the cheap call the search makes; ``simulate``
    (or ``evaluate(strategy, detail=True)``) builds the full :class:`SimResult`.
    Per-stage results are cached by (node range, actions, stage options), so a
    strategy that differs from an earlier one in one node's action or one
    boundary only recomputes the stage(s) it touches (see
    :meth:`evaluate_delta`).
    """

    def __init__(self, graph: TaskGraph, cluster, *, bucket_bytes: int = BUCKET_BYTES,
                 host_mem_bandwidth: float | None = None, host_tensor_s: float | None = None,
                 cache_size: int = 200_000):
        if graph.tp > 1:  # one rank's figures, on a device per tensor-parallel group (simulator.tp)
            if cluster.group != graph.tp:
                cluster = cluster.grouped(graph.tp)
            if not graph.meta.get("tp_comm"):
                graph = with_tp_comm(graph, cluster.intra_link)
                graph.meta = dict(graph.meta, tp_comm=True)
        self.graph = graph
        self.cluster = cluster
        self.n = graph.n
        self._unsafe = frozenset(graph.meta.get("replay_unsafe", ()))  # (never recomputed: see replay_safe)
        self.bucket_bytes = int(bucket_bytes)
        # the host's optimizer step: the cluster's figures unless given
        self.host_mem_bandwidth = float(cluster.host_step.bandwidth if host_mem_bandwidth is None
                                        else host_mem_bandwidth)
        self.host_tensor_s = float(cluster.host_step.per_tensor_s if host_tensor_s is None else host_tensor_s)
        self.cache_size = cache_size
        self.capacity = int(cluster.device.memory_bytes)
        self.mem_bw = cluster.device.mem_bandwidth * cluster.device.memory_efficiency
        self.host_link = cluster.host_link
        # the executor prefetches a swapped node's tensors on a GPU (side stream; Strategy.prefetch
        # nodes ahead); on the CPU it copies each back when the backward asks for it
        self.prefetch_ahead = cluster.device.kind != "cpu"
        self._layouts: dict = {}  # StageSpec by node range
        self._window: BufferWindow | None = None  # the buffers each stage's layout needs
        self._node_units: tuple | None = None  # simulator.zero3.node_units of the graph, once
        # a ZeRO-3 stage gathering in bf16 sees the graph without the casts it never makes (simulator.lowcast)
        self._low_view = low_view(graph)
        self._low_window: BufferWindow | None = None
        self._low_layouts: dict = {}
        self._stage_cache: dict = {}
        self._pipe_cache: dict = {}  # pipeline schedule timings by (times, m, schedule)
        self._links: dict = {}
        self._shapes: dict = {}  # StrategyShape by everything but the actions
        self._opt_total = graph.optimizer_bytes
        self._param_total = graph.param_bytes
        # the trainable parameters the step gives no gradient (an unread pooler's): no gradient is made for
        # them and the optimizer skips them (LayoutLM's last stage, its pooler's weight priced as a gradient
        # and stepped: its optimizer step 5 KiB, 36% of a small stage, over)
        self._gradless = set(graph.meta.get("gradless_params") or ())
        ps = [v for k, v in graph.params.items() if k not in self._gradless]  # model-wide figures the per-stage
        self._grads_all = sum(int(v[1]) for v in ps)  # optimizer transient scales from
        self._param_max = max((int(v[0]) for v in ps if v[1]), default=0)  # what the optimizer steps: no buffer
        self._opt_state_all = sum(int(v[2]) for v in ps) or sum(int(v[0]) for v in ps if v[1])
        self._opt_pos = {k: i for i, k in enumerate(graph.meta.get("opt_order") or ())}
        self._step_rates = self._rates()
        self._cut_bytes()
        self._node_of = [cluster.node_of(d) for d in range(cluster.num_devices)]
        self.stats = {"stage_evals": 0, "stage_hits": 0}

    # ------------------------------------------------------------ graph-level
    def _cut_bytes(self) -> None:
        """Bytes crossing a cut before node c: activations forward, gradients backward."""
        n = self.n
        fwd = [0] * (n + 1)
        bwd = [0] * (n + 1)
        for buf in self.graph.buffers:
            pa = buf.alloc_phase
            if pa >= 2 * n or buf.nbytes <= 0:
                continue
            nodes = [u if u < n else 2 * n - 1 - u for u in buf.uses if u < 2 * n]
            if buf.free_phase < 2 * n:
                pf = buf.free_phase
                nodes.append(pf if pf < n else 2 * n - 1 - pf)
            if not nodes:
                continue
            # what crosses a cut is what the nodes beyond it read (a view alone: Buffer.views)
            reads = [(u, u if u < n else 2 * n - 1 - u) for u in buf.uses if u < 2 * n]
            if pa < n:
                o, hi = pa, max(nodes)
                nb = buf.read_bytes(u for u, k in reads if k > o) or buf.nbytes
                for c in range(o + 1, hi + 1):
                    fwd[c] += nb
            else:
                o, lo = 2 * n - 1 - pa, min(nodes)
                nb = buf.read_bytes(u for u, k in reads if k < o) or buf.nbytes
                for c in range(lo + 1, o + 1):
                    bwd[c] += nb
        self.cut_fwd_bytes = fwd
        self.cut_bwd_bytes = bwd

    def stage(self, a: int, b: int, low: bool = False) -> StageSpec:
        """The :class:`StageSpec` of node range ``[a, b)`` (built on first use, then kept); ``low``: as a
        ZeRO-3 stage gathering its cast-only parameters in bf16 sees it (the same without any)."""
        if low:
            return self._low_stage(a, b)
        sp = self._layouts.get((a, b))
        if sp is None:
            if self._window is None:
                self._window = BufferWindow(self.graph)
            sp = self._layouts[(a, b)] = self._spec(self._window.view(a, b), a, b, ())
        return sp

    def _low_stage(self, a: int, b: int) -> StageSpec:
        sp = self._low_layouts.get((a, b))
        if sp is None:
            low = low_bytes(self.graph, a, b) if self._low_view is not None else ()
            if not any(low):
                sp = self.stage(a, b)
            else:
                if self._low_window is None:
                    self._low_window = BufferWindow(self._low_view)
                sp = self._spec(self._low_window.view(a, b), a, b, low)
            self._low_layouts[(a, b)] = sp
        return sp

    def _spec(self, view, a: int, b: int, low: tuple) -> StageSpec:
        L = build_layout(view, a, b)
        params, grads, opt = L.P_sum, sum(L.grad_bytes), L.O_sum
        opt_trans, opt_grads = self._opt_trans(a, b)
        buckets = self._bucket_plan(L)
        ddp = self._bucket_plan(L, L.ddp_grads, L.ddp_kinds)  # (the all-reduce's: without the gradless parameters)
        if self._node_units is None and self.graph.params:
            self._node_units = node_units(self.graph)
        z3 = zero3_facts(self.graph, a, b, L.dp_grads, lambda names: self._zero_params(a, b, names=names),
                         self._node_units)
        z3 = type(z3)(z3.units, z3.rest_grads, z3.rest_params,
                      tuple(b[:3] for b in self._bucket_plan(L, list(z3.rest_grads), list(z3.rest_kinds) or None)),
                      low, z3.made, z3.rest_kinds, z3.elems)
        model = StageModel(L, input_bytes=self.graph.stage_input_bytes(a, b), opt_trans=opt_trans,
                           opt_grads=opt_grads, host_lat=self.host_link.latency,
                           prefetch_ahead=self.prefetch_ahead,
                           sync_flats=[(x, nb) for x, nb, flat, _ in ddp if flat],
                           zero_params=self._zero_params(a, b), zero_sum=not self._single_tensor_step(),
                           buckets=tuple((x, nb, el) for x, nb, _, el in buckets),
                           zero_whole=self._zero_params(a, b, shared=True),
                           z2_state=(state_rate(self.graph), state_counter(self.graph)) if self.graph.params else (0, 0),
                           z3=z3)
        return StageSpec(layout=L, model=model, params=params, grads=grads, optimizer=opt,
                         buckets=[(x, nb) for x, nb, _, _ in buckets], opt_s=self._opt_time(params + grads + opt),
                         tensors=self._stage_tensors(a, b),
                         units=sum(1 for u in z3.units if u[0] > 0) + (1 if z3.rest_params else 0)
                         + sum(1 for x in low if x))

    def _stage_tensors(self, a: int, b: int) -> int:
        """The trainable parameter tensors stage ``[a, b)`` steps (synthetic graphs: a node's
        parameters are one tensor)."""
        g = self.graph
        if not g.params:
            return sum(1 for nd in g.nodes[a:b] if nd.grad_bytes > 0)
        return sum(1 for k in self._stage_params(a, b) if int(g.params[k][1]) > 0)

    def _opt_time(self, state: int) -> float:
        """Seconds of the stage's (unsharded, on-device) optimizer step: the profiled step's time in
        proportion to the stage's share of the model state (measured on CPU, roofline on a named GPU),
        or, for a graph without one, its state bytes at the device's memory bandwidth."""
        g = self.graph
        if g.opt_time_s > 0:
            total = sum(nd.param_bytes + nd.grad_bytes + nd.optimizer_bytes for nd in g.nodes)
            return g.opt_time_s * state / total if total else 0.0
        return state / self.mem_bw

    def _bucket_plan(self, L: StageLayout, dp_grads: list | None = None, kinds: list | None = None) -> list:
        """The stage's data-parallel gradient buckets as the executor all-reduces them
        (:func:`memflow.buckets.grad_buckets`), in order: (local node after whose backward it is
        reduced, bytes, bytes of its flat copy: 0 for a bucket of one gradient, reduced in place, bytes per
        element of its dtype: what ZeRO-2 pads it in). ``dp_grads``: per local node the gradients bucketed (default: ``L.dp_grads``, all of them), ``kinds``
        their dtype kinds (default: ``L.dp_kinds`` with ``L.dp_grads``, else one kind)."""
        out = []
        dg = L.dp_grads if dp_grads is None else dp_grads
        kinds = (L.dp_kinds if dp_grads is None else [(0,) * len(xs) for xs in dg]) if kinds is None else kinds
        for x, members in grad_buckets([list(zip(xs, ks)) for xs, ks in zip(dg, kinds)], self.bucket_bytes):
            nb = sum(dg[o][i] for o, i in members)
            o, i = members[0]
            out.append((x, nb, nb if len(members) > 1 else 0, element_size(kinds[o][i])))
        return out

    def _opt_trans(self, a: int, b: int) -> tuple[int, int]:
        """``(all, grads)``: bytes live in the stage's optimizer phase above its state — its parameters'
        gradients (freed by ``zero_grad`` after the step, replicas of shared parameters included) and
        the optimizer's temporaries (for an optimizer that steps one tensor at a time, torch's default
        on the CPU, those of the stage's largest parameter; else the stage's share of the traced
        ones) — and the gradients alone (what stays on the device when the step runs on the host)."""
        g = self.graph
        if not g.opt_transient_bytes:
            return 0, 0
        grads_all = self._grads_all
        if a == 0 and b == self.n:
            return int(g.opt_transient_bytes), min(grads_all, int(g.opt_transient_bytes))
        if not g.params:  # no parameter table (synthetic graphs): the stage's share of the whole
            tot = self._opt_total or self._param_total
            part = sum((nd.optimizer_bytes if self._opt_total else nd.param_bytes) for nd in g.nodes[a:b])
            return (int(g.opt_transient_bytes * part / tot) if tot else 0), 0
        names = self._stage_params(a, b)
        grads = sum(int(g.params[k][1]) for k in names if k not in self._gradless)
        if self._single_tensor_step():
            return grads + step_temps(self._ordered_sizes(names), self._step_rates, ordered=True), grads
        temps = max(0, int(g.opt_transient_bytes) - grads_all)
        tot = self._opt_state_all
        share = (sum(int(g.params[k][2]) for k in names)
                 or sum(int(g.params[k][0]) for k in names if g.params[k][1])) / tot \
            if tot else 0.0
        return int(grads + temps * share), grads

    def _rates(self) -> tuple:
        """``(solo, carry[, deep])`` of a one-tensor-at-a-time optimizer step (:mod:`simulator.optstep`): the
        profiler's, scaled up where the traced step of the whole model made more than they price it at
        (something the stand-ins did not show); without them, the traced step's per byte of the largest
        parameter (``carry`` 0). A stage's step is priced with them; ZeRO's shards and slices, stepped in
        an order the profile does not know, keep the traced step's rate per byte of the largest."""
        g = self.graph
        temps = max(0, int(g.opt_transient_bytes) - self._grads_all)
        r = g.meta.get("opt_step_rates")
        if r and self._param_max:
            r = tuple(float(v) for v in r)
            f = step_temps(self._ordered_sizes(g.params), r, ordered=True)
            return r if f >= temps else (tuple(v * temps / f for v in r) if f else (temps / self._param_max, 0.0))
        return (temps / self._param_max if self._param_max else 0.0), 0.0

    def _ordered_sizes(self, names) -> list:
        """The bytes of the parameters ``names`` that the optimizer steps, in its order (the profile's
        ``opt_order``; any it does not list after, largest first)."""
        g = self.graph
        pos = self._opt_pos
        names = [k for k in names if g.params[k][1] and k not in self._gradless]
        names.sort(key=lambda k: (pos.get(k, len(pos)), -int(g.params[k][0])))
        return [int(g.params[k][0]) for k in names]

    def _stage_params(self, a: int, b: int) -> set:
        """The parameter table's names stage ``[a, b)`` holds: those its nodes read or own."""
        g = self.graph
        names = {k for nd in g.nodes[a:b] for k in nd.read_params if k in g.params}
        return names | {k for k, v in g.params.items() if a <= v[3] < b}

    def _single_tensor_step(self) -> bool:
        """The optimizer steps one tensor at a time (torch's default on the CPU): its temporaries are
        one parameter's, not a share of all of them."""
        impl = self.graph.meta.get("optimizer_impl", "default")
        return impl == "single" or (impl == "default" and self.cluster.device.kind == "cpu")

    def _zero_params(self, a: int, b: int, shared: bool | None = None, names: set | None = None) -> tuple:
        """Per parameter stage ``[a, b)``'s optimizer steps, ``(bytes, state bytes, temporaries its step
        adds)``: what ZeRO-1 shares out among data-parallel ranks (StageModel.zero_shares). The
        temporaries are the traced step's, scaled as :meth:`_opt_trans` scales a stage's. ``shared``
        True: only the parameters other stages read too (their replicas stay whole under ZeRO-2);
        ``names``: only those (ZeRO-3's parameters kept whole)."""
        g = self.graph
        if not g.params:
            return ()
        temps = max(0, int(g.opt_transient_bytes) - self._grads_all)
        single, big, tot = self._single_tensor_step(), self._param_max, self._opt_state_all
        has_state = any(int(v[2]) for v in g.params.values())
        out = []
        outside = set()
        if shared is not None:
            outside = {k for i, nd in enumerate(g.nodes) if not a <= i < b for k in nd.read_params}
            outside |= {k for k, v in g.params.items() if not a <= v[3] < b}
        for k in sorted(self._stage_params(a, b)):
            if shared is not None and (k in outside) != shared:
                continue
            if names is not None and k not in names:
                continue
            pb, gb, ob = (int(v) for v in g.params[k][:3])
            if gb > 0:
                # (one tensor at a time: per byte of the largest parameter, in a shard or slice's unknown order)
                w = (pb / big if big else 0.0) if single else ((ob if has_state else pb) / tot if tot else 0.0)
                out.append((pb, ob, temps * w))
        return tuple(out)

    def _ring(self, s: int, dp: int):
        key = ("ring", s, dp)
        v = self._links.get(key)
        if v is None:
            devs = [s * dp + r for r in range(dp)]
            bw, lat = math.inf, 0.0
            for i in range(dp):
                ln = self.cluster.link(devs[i], devs[(i + 1) % dp])
                bw = min(bw, ln.bandwidth)
                lat = max(lat, ln.latency)
            v = self._links[key] = (bw, lat)
        return v

    def _p2p(self, s: int, dp: int):
        key = ("p2p", s, dp)
        v = self._links.get(key)
        if v is None:
            bw, lat = math.inf, 0.0
            for r in range(dp):
                ln = self.cluster.link(s * dp + r, (s + 1) * dp + r)
                bw = min(bw, ln.bandwidth)
                lat = max(lat, ln.latency)
            v = self._links[key] = (bw, lat)
        return v

    # ----------------------------------------------------------------- stages
    def _stage_ranges(self, st: Strategy) -> list:
        so = st.stage_of
        ranges, a = [], 0
        for k in range(1, self.n):
            if so[k] != so[k - 1]:
                ranges.append((a, k))
                a = k
        ranges.append((a, self.n))
        return ranges

    def _host_bw(self, st: Strategy, ranges: list) -> list:
        """Host-link bandwidth per stage: fair share among a machine's devices that copy."""
        hl = self.host_link
        pp, dp = st.pp, st.dp
        if not self.cluster.host_link_shared or (SWAP not in st.actions and not any(st.optimizer_on_host)):
            return [hl.bandwidth] * pp
        active = [
            (SWAP in st.actions[a:b]) or st.optimizer_on_host[s] for s, (a, b) in enumerate(ranges)
        ]
        per_machine: dict = {}
        node_of = self._node_of.__getitem__
        for s in range(pp):
            if active[s]:
                for r in range(dp):
                    mch = node_of(s * dp + r)
                    per_machine[mch] = per_machine.get(mch, 0) + 1
        out = []
        for s in range(pp):
            cnt = max([per_machine.get(node_of(s * dp + r), 1) for r in range(dp)])
            out.append(hl.bandwidth / max(cnt, 1))
        return out

    def stage_eval(self, a: int, b: int, actions, *, shard: str, opt_host: bool, dp: int, host_bw: float,
                   detail: bool = False, stage: int = 0, params_host: bool = False, prefetch: int = 1) -> StageEval:
        """The :class:`StageEval` of node range ``[a, b)`` under per-node ``actions`` and the stage's
        options (``shard``: its sharding level; ``host_bw``: the host-link bandwidth it gets; ``stage``:
        its index, whose dp ring times ZeRO-3's collectives; ``params_host``: ZeRO-3's shards on the
        host; ``prefetch``: swap-in depth), cached as the simulator's own."""
        ph = shard == SHARD_PARAMETERS and bool(params_host)
        shard = shard if dp > 1 or ph else SHARD_NONE  # (dp 1: ZeRO-3 only as parameter offload)
        comm = None
        if shard == SHARD_PARAMETERS:  # (dp 1: no collective, only the host copies on the unit timeline)
            comm = (*(self._ring(stage, dp) if dp > 1 else (math.inf, 0.0)), self.cluster.device.kind == "cpu")
        pf = prefetch if self.prefetch_ahead and SWAP in actions else 1
        return self._stage_eval((a, b, tuple(actions), shard, bool(opt_host) or ph, dp, host_bw, comm, ph, pf), detail)

    def _stage_eval(self, key: tuple, detail: bool = False) -> StageEval:
        if not detail:
            ev = self._stage_cache.get(key)
            if ev is not None:
                self.stats["stage_hits"] += 1
                return ev
        a, b, acts, shard, ohost, dp, bw, comm, ph, pf = key
        if self._unsafe:  # (nodes whose replay would differ from their forward run kept: so they are priced)
            acts = tuple(replay_safe(acts, {k - a for k in self._unsafe if a <= k < b}))
        # (ZeRO-3 gathers autocast's cast-only parameters in bf16)
        sp = self.stage(a, b, low=self._low_view is not None and shard == SHARD_PARAMETERS)
        ev = sp.model.evaluate(acts, dp, shard, ohost, bw, detail, comm, ph, pf)
        self.stats["stage_evals"] += 1
        if not detail:
            if len(self._stage_cache) >= self.cache_size:
                self._stage_cache.clear()
            self._stage_cache[key] = ev
        return ev

    def shape(self, st: Strategy) -> StrategyShape:
        """The strategy's :class:`StrategyShape` (cached by everything but the actions)."""
        key = (st.dp, st.pp, st.microbatches, st.schedule, tuple(st.stage_of), tuple(st.sharding),
               tuple(st.optimizer_on_host), tuple(st.params_on_host), st.prefetch)
        sh = self._shapes.get(key)
        if sh is not None:
            return sh
        pp, dp, m, sched = st.pp, st.dp, st.microbatches, st.schedule
        ranges = self._stage_ranges(st)
        specs = [self.stage(a, b) for a, b in ranges]
        shard = [st.sharded(s) for s in range(pp)]
        ohost = [bool(st.optimizer_on_host[s]) for s in range(pp)]
        phost = [st.params_host(s) for s in range(pp)]
        ks = [inflight(pp, s, m, sched) for s in range(pp)]
        cf, cb = [], []
        for s in range(pp - 1):
            c = ranges[s][1]
            bw, lat = self._p2p(s, dp)
            fb, bb = self.cut_fwd_bytes[c], self.cut_bwd_bytes[c]
            cf.append(lat + fb / bw if fb else 0.0)
            cb.append(lat + bb / bw if bb else 0.0)
        ag = [0.0] * pp  # ZeRO-1: broadcast of the updated parameter shards after the step
        lfac = [0.0] * pp
        buckets = [()] * pp
        comm = [None] * pp
        if dp == 1:  # parameter offload on one rank: no collective, the host copies on the unit timeline
            comm = [(math.inf, 0.0, self.cluster.device.kind == "cpu") if shard[s] == SHARD_PARAMETERS else None
                    for s in range(pp)]
        else:
            for s in range(pp):
                bw, lat = self._ring(s, dp)
                nb = len(specs[s].buckets)
                if shard[s] == SHARD_PARAMETERS:  # ZeRO-3: its gathers and reduce-scatters are in the stage's
                    # figures (simulator.zero3); the parameters kept whole are all-reduced in buckets
                    comm[s] = (bw, lat, self.cluster.device.kind == "cpu")
                    fac, lfac[s] = 2 * (dp - 1) / dp / bw, 2 * (dp - 1) * lat
                    buckets[s] = tuple((x, acc * fac, acc) for x, acc, _ in specs[s].model.z3.buckets)
                    continue
                if shard[s] == SHARD_GRADIENTS:  # ZeRO-2: a bucket's reduce-scatter is half an all-reduce (ring);
                    # after the step each bucket's slices are all-gathered in place (gloo: dp broadcasts of a
                    # slice each, the form that makes no temporary: memflow.executor.zero)
                    if self.cluster.device.kind == "cpu":
                        ag[s] = specs[s].params / bw + nb * dp * lat
                    else:
                        ag[s] = (dp - 1) / dp * specs[s].params / bw + nb * (dp - 1) * lat
                    fac, lfac[s] = (dp - 1) / dp / bw, (dp - 1) * lat
                    buckets[s] = tuple((x, acc * fac, acc) for x, acc in specs[s].buckets)
                    continue
                if shard[s] != SHARD_NONE:  # ZeroRedundancyOptimizer: each rank broadcasts its shard, one flat bucket
                    ag[s] = (dp - 1) / dp * specs[s].params / bw + dp * lat
                fac, lfac[s] = 2 * (dp - 1) / dp / bw, 2 * (dp - 1) * lat
                buckets[s] = tuple((x, acc * fac, acc) for x, acc in specs[s].buckets)
        host_opt = [0] * pp
        host_share = []
        for s in range(pp):
            if ohost[s]:
                o = specs[s].optimizer
                host_opt[s] = -(-o // dp) if shard[s] != SHARD_NONE else o
            if phost[s]:  # ZeRO-3's state (the units' slices, the whole parameters' whole), the step's
                # temporaries (it runs in host memory), the units' shards and gradients' slices
                z = self.stage(*ranges[s], low=self._low_view is not None).model
                _, _, _, state, temps = z.zero3(dp, True)
                host_opt[s] = state + temps + host_bytes(z.z3.units, dp, z.z3.low, z.z3.elems)
            share: dict = {}
            for r in range(dp):
                mch = self._node_of[s * dp + r]
                share[mch] = share.get(mch, 0) + 1
            host_share.append(tuple(share.items()))
        sh = StrategyShape(pp, dp, m, sched, ranges, specs, shard, ohost, ks, cf, cb, (tuple(cf), tuple(cb), m, sched),
                           ag, lfac, buckets, host_opt, tuple(host_share), comm, phost,
                           st.prefetch if self.prefetch_ahead else 1)
        if len(self._shapes) >= SHAPE_CACHE_SIZE:
            self._shapes.clear()
        self._shapes[key] = sh
        return sh

    def stage_figures(self, sh: StrategyShape, s: int, ev: StageEval, host_bw: float) -> tuple[int, float, int]:
        """Stage ``s`` of shape ``sh`` with per-micro-batch figures ``ev`` and host-link bandwidth
        ``host_bw``: ``(peak bytes per device, optimizer-step seconds, host bytes per device)``."""
        sp = sh.stages[s]
        P, G, O = sp.params, sp.grads, sp.optimizer
        o = sp.opt_s
        if sh.dp > 1 and sh.shard[s] != SHARD_NONE:  # each rank steps its 1/dp of the parameters, then broadcasts them
            dp = sh.dp
            P, G, O, o = P / dp, G / dp, O / dp, o / dp
        # (simulator.hostopt: a time per tensor stepped and the state's bytes at the host's rate)
        if sh.phost and sh.phost[s] and self.cluster.device.kind != "cpu":  # shards, slices and state all on the
            o = host_step_s(sp.units, P + G + O, self.host_mem_bandwidth, self.host_tensor_s)  # host: no copies
        elif sh.ohost[s] and self.cluster.device.kind != "cpu":  # (cpu-N: the host is the device;
            hl = self.host_link  # the same step, its bytes accounted as host memory, no copies)
            o = (G / host_bw + hl.latency) + host_step_s(sp.tensors, P + G + O, self.host_mem_bandwidth,
                                                         self.host_tensor_s) + (P / host_bw + hl.latency)
        k = sh.inflight[s]
        # host: the state a host optimizer holds, the rank's share of the step's batch (its micro-batches,
        # each freed after its backward) and the larger of the swapped copies of the micro-batches in
        # flight and, as the step starts, the whole batch every rank loads before it takes its share
        share = self.graph.input_bytes * sh.m
        return stage_peak(ev, k, sh.m)[0], o, sh.host_opt[s] + share + max(ev.swap_bytes * k, share * sh.dp)

    def _stages(self, st: Strategy, detail: bool = False) -> _Stages:
        sh = self.shape(st)
        bw = self._host_bw(st, sh.ranges)
        acts, dp = st.actions, st.dp
        stg = _Stages(sh, [], [], bw, [], [], [])
        for s, (a, b) in enumerate(sh.ranges):
            sa = tuple(acts[a:b])
            key = (a, b, sa, sh.shard[s], sh.ohost[s], dp, bw[s], sh.comm[s], sh.phost[s],
                   sh.prefetch if SWAP in sa else 1)  # (the depth changes only a stage that swaps)
            ev = self._stage_eval(key, detail)
            peak, opt_s, host_b = self.stage_figures(sh, s, ev, bw[s])
            stg.keys.append(key)
            stg.evals.append(ev)
            stg.peaks.append(peak)
            stg.opt_s.append(opt_s)
            stg.host_b.append(host_b)
        return stg

    def phase_bytes(self, strategy: Strategy) -> list[list[int]]:
        """Per stage, per phase ``F_0 .. F_{m-1}, B_{m-1} .. B_0`` of its first micro-batch with no other
        in flight, the bytes its ranks hold at that phase's peak: state, the batch's inputs, what the
        phase carries, its transient and the step's buffers made so far (the figures :func:`stage_peak`
        takes the most of). A one-micro-batch run's per-place peaks
        (:attr:`memflow.executor.report.RankReport.phase_peaks`) check them phase by phase."""
        stg = self._stages(strategy, detail=True)
        return [[ev.base + ev.carried[p] + ev.trans[p] + ev.step[p] for p in range(2 * (b - a))]
                for ev, (a, b) in zip(stg.evals, stg.ranges)]

    def clear_results(self) -> None:
        """Forget every evaluated stage and schedule timing; the graph-level stage specs stay."""
        self._stage_cache.clear()
        self._pipe_cache.clear()

    def fresh(self) -> "Simulator":
        """A simulator of the same graph and cluster that shares this one's graph-level stage specs
        (built once per node range) and none of its evaluated results."""
        other = Simulator(self.graph, self.cluster, bucket_bytes=self.bucket_bytes,
                          host_mem_bandwidth=self.host_mem_bandwidth, host_tensor_s=self.host_tensor_s,
                          cache_size=self.cache_size)
        other._layouts = self._layouts
        return other

    def validate(self, st: Strategy) -> None:
        """Raise :class:`~memflow.errors.StrategyError` (with the arithmetic) for an invalid strategy."""
        if st.tp not in (1, self.graph.tp):
            raise StrategyError(f"strategy tp {st.tp}: the graph was captured for tp {self.graph.tp}")
        st.validate(self.n, self.cluster.num_devices * st.tp)

    # -------------------------------------------------------------- evaluate
    def evaluate(self, strategy: Strategy, detail: bool = False):
        """Step time, per-device peaks and fit. ``detail=True`` returns a full SimResult: the same
        figures, with the per-phase memory split, the recorded schedule's ops and the events."""
        self.validate(strategy)
        stg = self._stages(strategy, detail)
        res = self._combine(strategy, stg, detail)
        return _per_rank(res, strategy.tp) if strategy.tp > 1 else res

    def evaluate_delta(self, base: Strategy, new: Strategy, base_stages: _Stages | None = None):
        """Evaluate ``new`` re-using ``base``'s per-stage results (``base_stages``, from
        :meth:`stages` or an earlier delta) for every stage whose actions and host-link share are
        unchanged; only the touched stage(s) are recomputed, then the schedule is re-combined.
        A ``new`` with other stages, options, micro-batches or schedule is evaluated in full (its
        unchanged stages still come from the stage cache). Returns (Evaluation, stages) so a
        chain of deltas can pass the stages along."""
        if (base_stages is None or new.dp != base.dp or new.pp != base.pp or new.microbatches != base.microbatches
                or new.schedule != base.schedule or new.stage_of != base.stage_of
                or new.sharding != base.sharding or new.optimizer_on_host != base.optimizer_on_host
                or new.params_on_host != base.params_on_host or new.prefetch != base.prefetch):
            self.validate(new)
            stg = self._stages(new)
            return self._combine(new, stg), stg
        # only actions changed: the (validated) base's mesh and placement still hold
        na, ba = new.actions, base.actions
        if len(na) != self.n or not _ACTION_SET.issuperset(na):
            self.validate(new)
        sh = base_stages.shape
        bw = self._host_bw(new, sh.ranges)
        stg = base_stages.copy(bw)
        for s, (a, b) in enumerate(sh.ranges):
            if bw[s] == base_stages.bw[s] and na[a:b] == ba[a:b]:
                continue
            sa = tuple(na[a:b])
            key = (a, b, sa, sh.shard[s], sh.ohost[s], sh.dp, bw[s], sh.comm[s], sh.phost[s],
                   sh.prefetch if SWAP in sa else 1)
            ev = self._stage_eval(key)
            stg.keys[s] = key
            stg.evals[s] = ev
            stg.peaks[s], stg.opt_s[s], stg.host_b[s] = self.stage_figures(sh, s, ev, bw[s])
        return self._combine(new, stg), stg

    def stages(self, strategy: Strategy) -> _Stages:
        """The per-stage results of a strategy (to seed :meth:`evaluate_delta`)."""
        return self._stages(strategy)

    # ------------------------------------------------------------ combining
    def _combine(self, st: Strategy, stg: _Stages, detail: bool = False):
        sh = stg.shape
        pp, dp, m, sched = sh.pp, sh.dp, sh.m, sh.sched
        evals = stg.evals
        cl = self.cluster
        # ---- memory
        peaks = stg.peaks
        host_machine = None
        host_fits = True
        if SWAP in st.actions or any(sh.ohost):
            host_machine = [0] * cl.num_nodes
            for s in range(pp):
                hb = stg.host_b[s]
                for mch, cnt in sh.host_share[s]:
                    host_machine[mch] += cnt * hb
            host_fits = max(host_machine) <= cl.host_memory_bytes
        cap = self.capacity
        fits = host_fits and max(peaks) <= cap

        # ---- time
        fwd = [e.fwd_s for e in evals]
        bwd = [e.bwd_s for e in evals]
        cf, cb, ag = sh.cf, sh.cb, sh.ag
        if pp == 1:  # (one stage: a closed form, cheaper than the memo)
            end, last_b, _ = run_pipeline(fwd, bwd, cf, cb, m, sched)
        else:  # the schedule's timing depends only on these numbers: memoise it across moves
            pkey = (tuple(fwd), tuple(bwd), sh.pipe_key)
            hit = self._pipe_cache.get(pkey)
            if hit is None:
                if len(self._pipe_cache) > self.cache_size:
                    self._pipe_cache.clear()
                hit = self._pipe_cache[pkey] = run_pipeline(fwd, bwd, cf, cb, m, sched)
            end, last_b, _ = hit
        stage_end = []
        ar_end = []
        opt_s = stg.opt_s
        buckets_rec = [] if detail else None
        step = -math.inf
        for s in range(pp):
            ev = evals[s]
            t_ar = end[s]
            if dp > 1:  # gradient all-reduce, bucket by bucket as the last backward completes them
                lfac = sh.lfac[s]
                free = 0.0
                t0 = last_b[s]
                ne = ev.bwd_node_end
                for x, xfer, acc in sh.buckets[s]:
                    ready = t0 + ne[x]
                    st0 = ready if ready > free else free
                    free = st0 + xfer + lfac
                    if detail:
                        buckets_rec.append((s, st0, free - st0, acc))
                if free > t_ar:
                    t_ar = free
            e = t_ar
            hfloor = m * ev.host_s
            if hfloor > e:
                e = hfloor
            e = e + opt_s[s] + ag[s]
            if e > step:
                step = e
            if detail:
                ar_end.append(t_ar)
                stage_end.append(e)
        if not detail:
            if dp == 1:
                peak_dev = list(peaks)
            else:
                peak_dev = self._rank_peaks(sh, evals, peaks)
            return Evaluation(step_time_s=step, peak_bytes=peak_dev, fits=fits, capacity_bytes=cap,
                              host_fits=host_fits)
        ops = run_pipeline(fwd, bwd, cf, cb, m, sched, record=True)[2]  # each op's start and end
        return self._detail(st, stg, peaks, sh.inflight, host_machine, fits, step, end, ar_end, opt_s, stage_end,
                            ops, cf, cb, ag, buckets_rec)

    @staticmethod
    def _rank_peaks(sh: StrategyShape, evals: list, peaks: list) -> list:
        """Per device (dp > 1): its stage's peak, or under ZeRO-1 its own rank's (its shard of the
        optimizer state and of the step; the stage's peak is the worst rank's)."""
        out = []
        for s, p in enumerate(peaks):
            rk = evals[s].ranks
            if rk:
                k = sh.inflight[s]
                out += [stage_peak(evals[s], k, sh.m, r)[0] for r in rk]
            else:
                out += [p] * sh.dp
        return out

    # --------------------------------------------------------------- detail
    def _detail(self, st, stg, peaks, ks, host_machine, fits, step, end, ar_end, opt_s, stage_end,
                ops, cf, cb, ag, buckets_rec) -> SimResult:
        pp, dp, m = st.pp, st.dp, st.microbatches
        cl = self.cluster
        ndev = pp * dp
        cap = self.capacity
        evals = stg.evals
        breakdown_s, curves_s, busy_s, events = [], [], [], []
        for s, (a, b) in enumerate(stg.ranges):
            ev = evals[s]
            ms = b - a
            k = ks[s]
            inp = self.graph.stage_input_bytes(a, b)
            ranks = ev.ranks or (None,)  # ZeRO-1: each rank's shard of the optimizer state and step
            breakdown_s.append([_breakdown(ev, k, m, ms, inp, r) for r in ranks])
            # ---- timeline: memory curve + events on the compute / comm / host streams
            # (as the peak counts them: base holds the running micro-batch's inputs, R each other
            # in-flight one's; between ops, base's copy is one of the in-flight ones' own)
            L = stg.shape.stages[s].layout
            pts = [(0.0, ev.base)]
            fdone = bstarted = 0
            b0_done = False
            ft = L.fwd_time
            for op, t0, t1 in ops[s]:
                if op >= 0:
                    others = fdone - bstarted
                    stepc = ev.S_after if b0_done else ev.S_fwd
                    t = t0
                    for x in range(ms):
                        sv = ev.step[x] if op == 0 else stepc
                        pts.append((t, ev.base + others * ev.R + ev.carried[x] + ev.trans[x] + sv))
                        t += ft[x]
                    fdone += 1
                    pts.append((t1, ev.base + (others + 1) * ev.R - inp + stepc))
                    name = f"F{op}"
                    for half, x, what, c0, du in ev.comm_ops:  # ZeRO-3's gathers beside the forward
                        if half == "F":  # (parameter offload's copies on the host link's lane)
                            events.append((s, "host" if what.startswith("copy") else "comm",
                                           f"{what} {self.graph.nodes[a + x].name} mb{op}", t0 + c0, du))
                    for x, c0, c1 in ev.copy_out:
                        events.append((s, "host", f"swap-out {self.graph.nodes[a + x].name} mb{op}", t0 + c0, c1 - c0))
                    if s < pp - 1 and cf[s] > 0:
                        events.append((s, "comm", f"send act mb{op}", t1, cf[s]))
                else:
                    j = -op - 1
                    bstarted += 1
                    others = fdone - bstarted
                    prev = t0
                    for x in range(ms - 1, -1, -1):
                        p = 2 * ms - 1 - x
                        sv = ev.step[p] if j == 0 else ev.S_after - ev.bcut[p]
                        pts.append((prev, ev.base + others * ev.R + ev.carried[p] + ev.trans[p] + sv))
                        prev = t0 + ev.bwd_node_end[x]
                    b0_done = True
                    pts.append((t1, ev.base + (others * ev.R - inp if others else 0) + ev.S_after))
                    if j == m - 1:  # the gradient sync's bucket copies, made between node backwards or after
                        for x, v1, vN, _, _, _ in ev.sync_points:
                            pts.append((t0 + ev.bwd_node_end[x] if x else t1, ev.base + (v1 if m == 1 else vN)))
                    name = f"B{j}"
                    for half, x, what, c0, du in ev.comm_ops:
                        if half == "B":
                            events.append((s, "host" if what.startswith("copy") else "comm",
                                           f"{what} {self.graph.nodes[a + x].name} mb{j}", t0 + c0, du))
                    for x, c0, c1 in ev.prefetch:
                        events.append((s, "host", f"prefetch {self.graph.nodes[a + x].name} mb{j}", t0 + c0, c1 - c0))
                    if s > 0 and cb[s - 1] > 0:
                        events.append((s, "comm", f"send grad mb{j}", t1, cb[s - 1]))
                events.append((s, "compute", name, t0, t1 - t0))
            if ag[s] > 0:
                z2 = st.sharded(s) == SHARD_GRADIENTS
                events.append((s, "comm", "all-gather param slices" if z2 else "broadcast param shards",
                               stage_end[s] - ag[s], ag[s]))
            ar_busy = 0.0
            for bs, t0, du, nb in buckets_rec:
                if bs == s:
                    what = "reduce-scatter" if st.sharded(s) == SHARD_GRADIENTS else "all-reduce"
                    events.append((s, "comm", f"grad {what} {nb / 2**20:.1f} MiB", t0, du))
                    ar_busy += du
            t_opt = stage_end[s] - ag[s] - opt_s[s]
            where = "host" if st.optimizer_on_host[s] else "compute"
            events.append((s, where, "optimizer step", t_opt, opt_s[s]))
            pts.append((stage_end[s], ev.base))
            curves_s.append([curve_arrays([(t, v + (r[0] - ev.base if r else 0)) for t, v in pts]
                                          + [(t_opt, r[0] + r[2] if r else ev.base + ev.opt_mem)]) for r in ranks])
            comm_busy = m * ((cf[s] if s < pp - 1 else 0.0) + (cb[s - 1] if s > 0 else 0.0) + ev.comm_s) + ar_busy + ag[s]
            host_busy = m * ev.host_s + (opt_s[s] if st.optimizer_on_host[s] else 0.0)
            comp_busy = m * (ev.fwd_s + ev.bwd_compute_s) + (0.0 if st.optimizer_on_host[s] else opt_s[s])
            busy_s.append({"compute": comp_busy, "comm": comm_busy, "host": host_busy})
        # replicate per device (under ZeRO-1, each rank its own)
        peak_dev = self._rank_peaks(stg.shape, evals, peaks) if dp > 1 else list(peaks)
        ev_dev = []
        for s, stream, name, t0, du in events:
            for r in range(dp):
                ev_dev.append((s * dp + r, stream, name, t0, du))
        binding = self._binding(st, stg, peak_dev, host_machine, fits, step, end, ar_end, opt_s, stage_end, busy_s)
        return SimResult(
            step_time_s=step, peak_bytes=peak_dev, capacity_bytes=[cap] * ndev, fits=fits,
            breakdown=[dict(breakdown_s[d // dp][d % dp if evals[d // dp].ranks else 0]) for d in range(ndev)],
            memory_curve=[curves_s[d // dp][d % dp if evals[d // dp].ranks else 0] for d in range(ndev)],
            busy=[dict(busy_s[d // dp]) for d in range(ndev)], binding=binding,
            host_bytes=host_machine or [0] * cl.num_nodes, host_capacity_bytes=cl.host_memory_bytes,
            events=ev_dev, strategy=st, pipeline_time_s=max(end), end_s=[stage_end[d // dp] for d in range(ndev)],
            bubble_fraction=1.0 - sum(m * (e.fwd_s + e.bwd_compute_s) for e in evals) / (pp * max(end))
            if max(end) > 0 else 0.0,
        )

    def _binding(self, st, stg, peak_dev, host_machine, fits, step, end, ar_end, opt_s, stage_end, busy_s) -> str:
        cap = self.capacity
        if not fits:
            d = max(range(len(peak_dev)), key=lambda i: peak_dev[i])
            if peak_dev[d] > cap:
                return f"memory: device {d} at {_over(peak_dev[d], cap)}"
            h = max(range(len(host_machine)), key=lambda i: host_machine[i])
            return f"host memory: machine {h} at {_over(host_machine[h], self.cluster.host_memory_bytes)}"
        s = max(range(st.pp), key=lambda i: stage_end[i])
        if ar_end[s] > end[s] + 1e-12 and ar_end[s] - end[s] > 0.05 * step:
            return f"data-parallel all-reduce: stage {s} ({(ar_end[s] - end[s]) * 1e3:.2f} ms exposed)"
        ev = stg.evals[s]
        if ev.comm_stall_s * st.microbatches > 0.05 * step:
            also = " (and parameter offload copies)" if st.params_host(s) else ""
            return (f"ZeRO-3 gathers and reduce-scatters{also}: stage {s} "
                    f"({ev.comm_stall_s * st.microbatches * 1e3:.2f} ms exposed)")
        if st.microbatches * ev.host_s >= end[s] * 0.999 or ev.stall_s * st.microbatches > 0.05 * step:
            return f"host link: stage {s} (swap traffic {st.microbatches * ev.host_s * 1e3:.2f} ms)"
        if st.optimizer_on_host[s] and opt_s[s] > 0.3 * step:
            return f"host link: stage {s} (host optimizer {opt_s[s] * 1e3:.2f} ms)"
        c = max(range(st.pp), key=lambda i: busy_s[i]["compute"])
        frac = busy_s[c]["compute"] / step if step > 0 else 0.0
        return f"compute: stage {c} (busy {frac:.0%} of the step)"


def simulate(graph: TaskGraph, strategy: Strategy, cluster) -> SimResult:
    """Simulate one training step of ``strategy`` and return the full :class:`SimResult`."""
    return Simulator(graph, cluster).evaluate(strategy, detail=True)


def _per_rank(res, tp: int):
    """A result per grouped device as one per real device (rank ``v·tp + t`` of group ``v``)."""
    res.peak_bytes = expand_devices(res.peak_bytes, tp)
    if isinstance(res, SimResult):
        for name in ("capacity_bytes", "breakdown", "memory_curve", "busy", "end_s"):
            setattr(res, name, expand_devices(getattr(res, name), tp))
        res.events = [(d * tp + t, *rest) for d, *rest in res.events for t in range(tp)]
    return res
