"""ZeRO-3 / FSDP (sharding level ``parameters``) in the stage model: what it adds per phase, and its
collectives on the comm stream. :meth:`simulator.stage.StageModel.evaluate` applies these to the
stage's figures under the nodes' actions (one evaluator; these are its ZeRO-3 terms).

The rules are the executor's (:mod:`memflow.executor.zero3`). Each local node ``x`` is an FSDP
*unit*: the trainable parameters only ``x`` reads (``u_x`` bytes; a parameter read by several
nodes, or by another stage, stays whole on every rank and its gradient is all-reduced in buckets
during the last micro-batch, as without sharding). With ``dp`` ranks a unit is padded to a
multiple of ``dp`` elements (``full_x``) and a rank holds ``shard_x = full_x / dp`` of it, and
``1/dp`` of its gradient and optimizer state. Per micro-batch op, with ``q`` / ``r`` the stage's
unit before / after ``y`` in node order:

* forward: ``y``'s full parameters are gathered from the start of F_q (the prefetch one unit ahead,
  started when F_q starts; from F_y for the stage's first unit) until F_y ends;
* backward: from the start of B_r (B_y for the stage's last unit) until B_y ends (a recomputed
  node's replay inside B_y reads them);
* after B_y its gradient (made in B_y, as the traced backward makes it) is copied into one flat
  padded tensor (``full_y`` bytes, beside the gradient: the sync point), dropped, and
  reduce-scattered in place; the copy stays in flight until the reduce-scatter of the next unit
  starts (after B_q) or the backward op ends, when this rank's chunk of it is copied out (the
  first micro-batch: ``shard_y`` beside the copy for a moment) or added to the rank's sharded
  gradient, carried as a per-step buffer from then on in place of the whole one.

Times, on the stage's data-parallel ring (bandwidth ``bw``, latency ``lat``): a gather is a ring
all-gather of ``full_x`` (``(dp-1)/dp · full_x / bw + (dp-1) lat``; on gloo ``dp`` in-place
broadcasts of a slice each: ``full_x / bw + dp · lat``), a reduce-scatter half a ring all-reduce
(``(dp-1)/dp · full_x / bw + (dp-1) lat``; on gloo ``dp`` in-place reduces of a chunk each:
``full_x / bw + dp · lat``). One comm stream runs them in the order they are
started; a node's compute waits for its gather (a stall where the node before it did not hide
it), and a reduce-scatter is waited for when the next one starts (a stall where the backward
between them did not hide it) and at the end of the backward op.

Parameters on the host (offload ``optimizer+parameters``, ZeRO-Infinity style; the optimizer is on
the host too): a unit's shard, its gradient's slice and its optimizer state live in host memory.
Device memory loses every unit's shard (``params``) and its gradient's slice (the sharded per-step
buffer, and the slice copied out at the first micro-batch's wait); the gathers in flight are as
above: the executor copies the host shard straight into this rank's slice of the unit's flat
buffer, so no separate device copy of the shard exists. Time: before each gather its shard is
copied host→device on the host link (``shard_x / host_bw + host_lat``), one host-link stream,
started where the gather is (one unit ahead), the gather after it; a waited reduce-scatter's slice
is copied device→host (``gshard_x / host_bw + host_lat``) on the same stream, and the backward op
ends when its last copy has. On the CPU (no side stream: the executor copies in the compute
thread) each copy-in runs inline where its gather is started, and each copy-out where its
reduce-scatter is waited for. The optimizer step runs on the host with no copies.

In bf16 a unit's cast-only parameters (``Zero3Facts.low``) are gathered in bf16, a part of their own
padded on its own (:func:`parts_split`): the gathered bytes (and a host copy-in's) are half theirs;
the shards, gradients and flat copies stay fp32. The casts such a stage never makes are out of the
graph it is evaluated on (:mod:`simulator.lowcast`).
"""
from __future__ import annotations

from dataclasses import dataclass

from memflow.buckets import element_size

from .layout import param_kind, state_counter, state_rate

__all__ = ["Zero3Facts", "zero3_facts", "node_units", "unit_split", "parts_split", "phase_terms", "state_terms", "phase_values", "comm_times",
           "host_times", "host_bytes", "timeline"]

ELEMENT = 4  # bytes per element a unit is padded in (fp32 parameters and gradients)


@dataclass(frozen=True)
class Zero3Facts:
    """A stage's ZeRO-3 units: per local node ``(parameter, gradient, optimizer-state bytes)`` of its
    unit (zeros: none), and per local node the gradient bytes of the parameters kept whole that the
    all-reduce buckets hold (as :attr:`simulator.layout.StageLayout.dp_grads`), per parameter
    kept whole ``(bytes, state bytes, step temporaries)`` (as ``StageModel.zero_params``), and the
    buckets those gradients are all-reduced in (``Simulator._bucket_plan``)."""

    units: tuple
    rest_grads: tuple
    rest_params: tuple
    buckets: tuple = ()  # the all-reduce buckets of the whole parameters' gradients: (x, bytes, flat copy bytes)
    # per local node, the fp32 bytes of its unit's parameters gathered in bf16 (memflow.graph.casts: a part
    # of their own, padded on its own; empty: none)
    low: tuple = ()
    # per local node, the gradient bytes of its unit the step makes (less its gradless parameters': the
    # trace never held those, the flat copy's zeros stand in for them; empty: every unit's whole gradient)
    made: tuple = ()
    # per local node, the dtype kinds of rest_grads' gradients (memflow.buckets.dtype_kind; empty: one kind)
    rest_kinds: tuple = ()
    # per local node, the bytes per element of its unit's dtype (one flat buffer per unit, one dtype: padded to
    # dp of its elements; empty: ELEMENT; a complex64 unit of an odd element count padded as fp32 was short)
    elems: tuple = ()

    @property
    def any(self) -> bool:
        return any(u[0] for u in self.units)


def zero3_facts(graph, a: int, b: int, dp_grads: list, zero_params, per_node: tuple | None = None) -> Zero3Facts:
    """The units of stage ``[a, b)`` of ``graph`` (the executor's rule: a trainable parameter that
    only its owner node reads). Without a parameter table (synthetic graphs) each node's
    parameters are its unit. ``zero_params(names)``: the ``(bytes, state, temporaries)`` rows of
    the named parameters. ``per_node``: :func:`node_units` of ``graph`` (made here if not given: a
    search lays out hundreds of stages of one graph)."""
    m = b - a
    if not graph.params:
        units = tuple((int(nd.param_bytes), int(nd.grad_bytes), int(nd.optimizer_bytes)) if nd.grad_bytes > 0
                      else (0, 0, 0) for nd in graph.nodes[a:b])
        return Zero3Facts(units, tuple(() for _ in range(m)), ())
    unit_of, rest_of, made_of, elem_of = per_node if per_node is not None else node_units(graph)
    rest_names = [k for x in range(a, b) for k, _, _, _ in rest_of[x]]
    rest_grads = tuple(tuple(gb for _, gb, lo, hi in rest_of[x] if a <= lo and hi < b) for x in range(a, b))
    rest_kinds = tuple(tuple(param_kind(graph, k) for k, _, lo, hi in rest_of[x] if a <= lo and hi < b)
                       for x in range(a, b))
    return Zero3Facts(tuple(unit_of[a:b]), rest_grads, tuple(zero_params(set(rest_names))), made=tuple(made_of[a:b]),
                      rest_kinds=rest_kinds, elems=tuple(elem_of[a:b]))


def node_units(graph) -> tuple[list, list, list, list]:
    """Per node of ``graph`` (with a parameter table), what does not depend on the stage: its ZeRO-3
    unit ``(parameter, gradient, optimizer-state bytes)`` of the trainable parameters it owns and only
    it reads, its other trainable parameters ``(name, gradient bytes, first reader, last reader)``
    (kept whole; their gradients are a stage's to all-reduce where every reader is on it), the
    gradient bytes of its unit the step makes (its gradless parameters' left out), and its unit's bytes per
    element. A gradless parameter's optimizer state is the sharded step's (:func:`simulator.layout.state_rate`:
    it steps the unit's flat slice, zeros and all), which the traced step never made."""
    gradless = set(graph.meta.get("gradless_params", ()))
    rate = state_rate(graph) if gradless else 0
    counter = state_counter(graph) if gradless else 0
    readers: dict[str, set] = {}
    for nd in graph.nodes:
        for k in nd.read_params:
            readers.setdefault(k, set()).add(nd.index)
    whole = set(getattr(graph, "whole_params", ()) or ())  # (handed on as views: never sharded)
    unit_of, rest_of, made_of, elem_of = [], [], [], []
    for nd in graph.nodes:
        u = [0, 0, 0]
        made = 0
        rest = []
        el = ELEMENT
        for k in nd.param_names:
            v = graph.params.get(k)
            if v is None or int(v[1]) <= 0:
                continue
            rd = readers.get(k, set())
            if rd <= {nd.index} and k not in whole:
                u[0] += int(v[0])
                u[1] += int(v[1])
                u[2] += int(v[2]) if k not in gradless else rate * int(v[0]) + counter
                made += 0 if k in gradless else int(v[1])
                el = element_size(param_kind(graph, k))  # (one dtype per unit: memflow.executor.zero3)
            else:
                # (no reader: every reader is on any stage, as the empty all() held before)
                rest.append((k, int(v[1]), min(rd) if rd else graph.n, max(rd) if rd else -1))
        unit_of.append(tuple(u))
        rest_of.append(tuple(rest))
        made_of.append(made)
        elem_of.append(el)
    return unit_of, rest_of, made_of, elem_of


def unit_split(nbytes: int, dp: int, element: int = ELEMENT) -> tuple[int, int]:
    """``(full, shard)`` bytes of a unit of ``nbytes`` over ``dp`` ranks, padded to ``dp`` elements of
    ``element`` bytes."""
    if nbytes <= 0:
        return 0, 0
    shard = -(-nbytes // (dp * element)) * element
    return shard * dp, shard


def parts_split(nbytes: int, low: int, dp: int, element: int = ELEMENT) -> tuple[int, int, int]:
    """``(gathered, full, shard)`` bytes of a unit of ``nbytes`` bytes (of ``element``-byte elements) of which
    ``low`` fp32 bytes are gathered in bf16: each part padded to ``dp`` elements on its own, the bf16 part
    gathered at half its bytes; ``full`` / ``shard``: the fp32 flat copy of its gradients and a rank's fp32
    slice of it (or of the parameters' shards)."""
    fl, sl = unit_split(low, dp)
    fr, sr = unit_split(nbytes - low, dp, element)
    return fl // 2 + fr, fl + fr, sl + sr


def phase_terms(units: tuple, dp: int, m: int, host: bool = False, low: tuple = (), made: tuple = (),
                elems: tuple = ()) -> tuple:
    """ZeRO-3's memory terms of one stage's phases ``0 .. 2m-1`` (see the module's docstring):
    ``(add, step, syncs, shed, full, gfull, gshard)``. ``add[p]``: bytes alive in phase p beside its
    traced figures (gathered parameters, reduce-scatters' flat copies in flight); ``step[p]``: the
    change of the per-step buffers (whole gradients out from after their backward, sharded ones in
    from their first reduce-scatter's wait); ``syncs``: per unit ``(y, gathered, flat_before,
    slice_before)`` for the sync point after B_y: the prefetched gather beside it, and the flat
    copy and the slice of the reduce-scatter waited for there (the unit after y's; 0, 0: none) and y's
    gradient the step made (``made[y]``: less its gradless parameters', which only the flat copy's
    zeros stand for; empty: the unit's whole gradient);
    ``shed``: what the per-step buffers lose in all (whole gradients less their slices); per local
    node its unit's padded ``full`` bytes of parameters and ``full`` and ``shard`` of gradients.
    ``host``: the parameters on the host (the gradients' slices go there: no ``shard`` on the device);
    ``low``: per local node the bytes of its unit gathered in bf16 (:func:`parts_split`); ``elems``: per local
    node the bytes per element of its unit (:attr:`Zero3Facts.elems`)."""
    order = [x for x in range(m) if units[x][0] > 0]
    full, gfull, gshard = [0] * m, [0] * m, [0] * m
    for x in order:
        lb = low[x] if low else 0
        el = elems[x] if elems else ELEMENT
        full[x] = parts_split(units[x][0], lb, dp, el)[0]
        _, gfull[x], gshard[x] = parts_split(units[x][1], lb, dp, el)
        if host:
            gshard[x] = 0
    add = [0] * (2 * m + 1)
    step = [0] * (2 * m + 1)
    syncs = []
    shed = 0
    for i, y in enumerate(order):
        q = order[i - 1] if i > 0 else None
        r = order[i + 1] if i + 1 < len(order) else None
        # forward: from F_q (its prefetch) through F_y
        add[q if q is not None else y] += full[y]
        add[y + 1] -= full[y]
        # backward: from B_r through B_y
        add[2 * m - 1 - (r if r is not None else y)] += full[y]
        add[2 * m - y] -= full[y]
        # reduce-scatter's flat copy in flight: B_{y-1} .. B_q (or the end of the op)
        end = 2 * m - q if q is not None else 2 * m
        if 2 * m - y < end:
            add[2 * m - y] += gfull[y]
            add[end] -= gfull[y]
        # per-step buffers: the whole gradient out after B_y (as made), its slice in after the wait
        g = made[y] if made else units[y][1]
        step[2 * m - y] -= g
        step[end] += gshard[y]
        shed += g - gshard[y]
        syncs.append((y, full[q] if q is not None else 0, gfull[r] if r is not None else 0,
                      gshard[r] if r is not None else 0, g))
    return _run(add, 2 * m), _run(step, 2 * m), syncs, shed, full, gfull, gshard


def state_terms(facts: Zero3Facts, dp: int, m: int, P_sum: int, O_sum: int, step_opt: int, opt_grads: int,
                opt_trans: int, zero_params: tuple, zero_sum: bool, host: bool = False) -> tuple:
    """A stage's ZeRO-3 figures over ``dp`` ranks, alike on every rank: ``(terms, params, gradients
    in the optimizer step, optimizer state, the step's temporaries)``, ``terms`` its
    :func:`phase_terms`. Each unit's parameters, gradient and state are a ``1/dp`` slice (padded),
    the parameters kept whole are whole; the step's temporaries as ZeRO-2's
    (``StageModel.zero2``), of the slices and the whole parameters. The stage's all-keep figures:
    ``P_sum`` / ``O_sum`` its parameters and state, ``step_opt`` its per-step buffers in the
    optimizer phase, ``opt_grads`` / ``opt_trans`` its step's gradients / bytes above the state,
    ``zero_params`` / ``zero_sum`` its parameter table (as ``StageModel``'s). ``host``: the units'
    shards and gradients' slices on the host (not in ``params`` / the step's gradients)."""
    units = facts.units
    low = facts.low
    elems = facts.elems
    terms = phase_terms(units, dp, m, host, low, facts.made, elems)
    shards = [parts_split(pb, low[x] if low else 0, dp, elems[x] if elems else ELEMENT)[2]
              for x, (pb, _, _) in enumerate(units) if pb > 0]
    params = P_sum - sum(pb for pb, _, _ in units) + (0 if host else sum(shards))
    grads = step_opt + opt_grads - terms[3]
    # (a unit's state: its share of the per-byte state, and the per-parameter part (AdamW's step count)
    # whole, of which the step over its flat slice keeps one)
    state = O_sum - sum(ob for _, _, ob in units) + sum(ob // pb * sh + ob % pb for (pb, _, ob), sh in
                                                        zip([u for u in units if u[0] > 0], shards))
    rest = facts.rest_params
    if zero_params and not zero_sum:
        rate = max(t / pb for pb, _, t in zero_params if pb)
        temps = int(rate * max(shards + [pb for pb, _, _ in rest], default=0))
    elif zero_params:
        wt = sum(t for _, _, t in rest)
        temps = int((sum(t for _, _, t in zero_params) - wt) / dp + wt)
    else:
        temps = max(0, opt_trans - opt_grads) // dp
    return terms, params, grads, state, temps


def phase_values(terms: tuple, m: int, kv: list, kv0: list, S_after: int, run: list,
                 inp: int, bound: list | None = None) -> tuple:
    """The per-phase bytes (without, with the per-step buffers) of a stage under ZeRO-3 and its
    per-step buffers after a backward: the all-keep figures ``kv`` / ``kv0`` / ``S_after`` with the
    actions' changes ``run`` (per phase), plus :func:`phase_terms`' gathers and copies in flight and
    the sync point after each unit's backward put in the phase it starts: the unit's gradient and
    flat copy, the reduce-scatter waited for there (its copy, the slice copied out of it), the
    prefetched gather, on what the phases either side hold (the smaller). ``inp``: the
    micro-batch's input bytes (gone after its backward). ``bound``: with every node kept, per B-half
    phase the bytes alive as it starts (the sync point before it holds those, the unit's gradient and
    its copies: exact where the phases' peaks either side are not)."""
    add, step, syncs, shed, _, gfull, gshard = terms
    v = [kv[p] + run[p] + add[p] for p in range(2 * m)]
    v0 = [kv0[p] + run[p] + add[p] + step[p] for p in range(2 * m)]
    S_after = S_after - shed
    for y, gathered, flat_r, slice_r, g in syncs:
        flat = max(flat_r, gfull[y])  # (the one waited for dies before y's is made)
        if y > 0:
            j = 2 * m - 1 - y
            a, b = kv[j] + run[j], kv[j + 1] + run[j + 1]
            a0, b0 = kv0[j] + step[j] + run[j], kv0[j + 1] + step[j + 1] + run[j + 1]
            w = min(a, b + g) if bound is None else min(a, b + g, bound[j + 1] + g)
            w += gathered + flat
            if w > v[j + 1]:
                v[j + 1] = w
            w = min(a0 + slice_r, b0 + g) if bound is None else \
                min(a0 + slice_r, b0 + g, bound[j + 1] + (kv0[j + 1] - kv[j + 1]) + step[j + 1] + g)
            w += gathered + flat
            if w > v0[j + 1]:
                v0[j + 1] = w
        else:  # after the whole backward: the gradient whole, the flat copies, the inputs gone
            j = 2 * m - 1
            w = g - gshard[0] + flat - inp
            if w > v[j]:
                v[j] = w
            if S_after + w > v0[j]:
                v0[j] = S_after + w
    if syncs and syncs[0][0] > 0:  # the lowest unit's copy, waited for at the op's end
        w = gfull[syncs[0][0]] - inp
        if w > v[2 * m - 1]:
            v[2 * m - 1] = w
        if S_after + w > v0[2 * m - 1]:
            v0[2 * m - 1] = S_after + w
    return v, v0, S_after


def _run(d: list, n: int) -> list:
    out, acc = [], 0
    for p in range(n):
        acc += d[p]
        out.append(acc)
    return out


def comm_times(units: tuple, dp: int, bw: float, lat: float, gloo: bool, low: tuple = ()) -> tuple[list, list]:
    """Per local node ``(gather seconds, reduce-scatter seconds)`` of its unit (0: none); ``low``: per
    node its unit's bytes gathered in bf16 (a collective per part)."""
    ag, rs = [], []
    for x, (pb, gb, _) in enumerate(units):
        if pb <= 0:
            ag.append(0.0)
            rs.append(0.0)
            continue
        lb = low[x] if low else 0
        full = parts_split(pb, lb, dp)[0]
        gfull = parts_split(gb, lb, dp)[1]
        n = (lb > 0) + (pb > lb)  # collectives per gather / reduce-scatter
        ag.append(full / bw + n * dp * lat if gloo else (dp - 1) / dp * full / bw + n * (dp - 1) * lat)
        rs.append(gfull / bw + n * dp * lat if gloo else (dp - 1) / dp * gfull / bw + n * (dp - 1) * lat)
    return ag, rs


def host_times(units: tuple, dp: int, bw: float, lat: float, low: tuple = ()) -> tuple[list, list]:
    """Parameters on the host: per local node ``(shard copy-in seconds, gradient slice copy-out
    seconds)`` of its unit on a host link of ``bw`` bytes/s and latency ``lat`` (0: none); ``low``: per
    node its unit's bytes gathered in bf16, rounded on the host and copied in at half their bytes."""
    cin, cout = [], []
    for x, (pb, gb, _) in enumerate(units):
        if pb <= 0:
            cin.append(0.0)
            cout.append(0.0)
            continue
        lb = low[x] if low else 0
        cin.append((unit_split(lb, dp)[1] // 2 + unit_split(pb - lb, dp)[1]) / bw + lat)
        cout.append(parts_split(gb, lb, dp)[2] / bw + lat)
    return cin, cout


def host_bytes(units: tuple, dp: int, low: tuple = (), elems: tuple = ()) -> int:
    """Parameters on the host: the host bytes per rank of the units' shards and gradients' slices (``low``: per
    node the bytes of its unit's bf16-gathered part, padded on its own; ``elems``: per node its unit's bytes per
    element)."""
    return sum(parts_split(pb, low[x] if low else 0, dp, elems[x] if elems else ELEMENT)[2]
               + parts_split(gb, low[x] if low else 0, dp, elems[x] if elems else ELEMENT)[2]
               for x, (pb, gb, _) in enumerate(units) if pb > 0)


def timeline(fwd: list, bwd: list, ag: list, rs: list, record: list | None = None, cin: list | None = None,
             cout: list | None = None, inline: bool = False) -> tuple[float, float, list]:
    """One micro-batch's forward and backward op under ZeRO-3's collectives: ``(forward seconds,
    backward seconds, per local node the offset at which B_x ends)``, from the nodes' compute
    seconds ``fwd`` / ``bwd`` (a backward's replay and swap stalls included) and each unit's
    gather / reduce-scatter seconds (see the module's docstring). ``record``: a list to append
    each collective to, ``(half, x, kind, start, seconds)`` (half ``"F"`` or ``"B"``, offsets from its
    op's start; kind ``"all-gather"``, ``"reduce-scatter"``, ``"copy-in"`` or ``"copy-out"``).
    ``cin`` / ``cout``: parameters on the host, each unit's shard copy-in before its gather and its
    gradient slice's copy-out after its reduce-scatter is waited for, on one host-link stream
    (:func:`host_times`; None: none); ``inline``: those copies run in the compute thread instead
    (the CPU), delaying what follows them."""
    if record is None and cin is None and cout is None:  # (a search's evaluation: no copies, nothing kept)
        return _timeline_plain(fwd, bwd, ag, rs)
    m = len(fwd)
    order = [x for x in range(m) if ag[x] > 0 or rs[x] > 0]
    nxt = {x: order[i + 1] for i, x in enumerate(order[:-1])}
    prv = {x: order[i - 1] for i, x in enumerate(order) if i > 0}
    units = set(order)

    def start(half: str, x: int, kind: str, t0: float, du: float) -> float:
        if record is not None:
            record.append((half, x, kind, t0, du))
        return t0 + du

    clk = [0.0, 0.0, 0.0]  # the comm stream and the host-link stream: free from; the compute thread's
    # time after an inline copy

    def gather(half: str, x: int, t0: float) -> float:
        if cin is not None:  # the shard's copy-in first, on the host link (or inline)
            clk[1] = start(half, x, "copy-in", max(t0, clk[1]), cin[x])
            t0 = clk[1]
        clk[2] = t0
        clk[0] = start(half, x, "all-gather", max(t0, clk[0]), ag[x])
        return clk[0]

    def issue(half: str, x: int, t: float) -> float:  # x's gather started at t: (the compute thread's time)
        land[x] = gather(half, x, t)
        return clk[2] if inline else t

    def ready(half: str, x: int, t: float, ahead: dict) -> float:  # x's gather waited for, the next one's started
        if x not in land:
            t = issue(half, x, t)
        if land[x] > t:
            t = land[x]
        y = ahead.get(x)
        return issue(half, y, t) if y is not None else t

    t = 0.0
    land: dict = {}
    for x in range(m):
        if x in units:
            t = ready("F", x, t, nxt)
        t += fwd[x]
    f = t
    t = 0.0
    clk[0] = clk[1] = 0.0
    land = {}
    pending = None  # (unit, when its reduce-scatter ends)
    node_end = [0.0] * m

    def waited(t: float) -> float:  # the pending reduce-scatter waited for (and its slice copied out)
        if pending[1] > t:
            t = pending[1]
        if cout is not None:
            clk[1] = start("B", pending[0], "copy-out", max(t, clk[1]), cout[pending[0]])
            if inline:
                t = clk[1]
        return t

    for x in range(m - 1, -1, -1):
        if x in units:
            t = ready("B", x, t, prv)
        t += bwd[x]
        if x in units:
            if pending is not None:
                t = waited(t)
            clk[0] = start("B", x, "reduce-scatter", max(t, clk[0]), rs[x])
            pending = (x, clk[0])
        node_end[x] = t
    if pending is not None:  # (the last reduce-scatter, waited at the op's end)
        t = waited(t)
    if cout is not None and clk[1] > t:  # (and the last copy-out)
        t = clk[1]
    return f, t, node_end


def _timeline_plain(fwd: list, bwd: list, ag: list, rs: list) -> tuple[float, float, list]:
    """:func:`timeline` without host copies and without a record (``inline`` then changes nothing): the
    same clocks in one loop per half, no closures (a search evaluates a ZeRO-3 stage thousands of times).
    ``tests/test_sharding.py`` holds it equal to the general form."""
    m = len(fwd)
    order = [x for x in range(m) if ag[x] > 0 or rs[x] > 0]
    ahead = [-1] * m  # per unit: the unit whose gather starts once its own is waited for (-1: none)
    for i in range(len(order) - 1):
        ahead[order[i]] = order[i + 1]
    t = comm = 0.0
    land = [-1.0] * m  # per unit: when its gather ends (-1: not started)
    for x in range(m):
        if ag[x] > 0 or rs[x] > 0:
            if land[x] < 0:
                comm = land[x] = (t if t > comm else comm) + ag[x]
            if land[x] > t:
                t = land[x]
            y = ahead[x]
            if y >= 0:
                comm = land[y] = (t if t > comm else comm) + ag[y]
        t += fwd[x]
    f = t
    behind = [-1] * m
    for i in range(1, len(order)):
        behind[order[i]] = order[i - 1]
    t = comm = 0.0
    land = [-1.0] * m
    pending = -1.0  # when the pending reduce-scatter ends (-1: none)
    node_end = [0.0] * m
    for x in range(m - 1, -1, -1):
        unit = ag[x] > 0 or rs[x] > 0
        if unit:
            if land[x] < 0:
                comm = land[x] = (t if t > comm else comm) + ag[x]
            if land[x] > t:
                t = land[x]
            y = behind[x]
            if y >= 0:
                comm = land[y] = (t if t > comm else comm) + ag[y]
        t += bwd[x]
        if unit:
            if pending > t:
                t = pending
            comm = pending = (t if t > comm else comm) + rs[x]
        node_end[x] = t
    if pending > t:
        t = pending
    return f, t, node_end
