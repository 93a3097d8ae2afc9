"""Per-stage memory and time of one pipeline stage (nodes ``a .. b-1``).

Local phases and the buffer groups of a :class:`~simulator.layout.StageLayout`
are :mod:`simulator.layout`'s.

:func:`eval_stage` applies the per-node actions (keep / recompute / swap) and
the per-stage options to a layout and returns a :class:`StageEval`, a handful
of floats that :mod:`simulator.pipeline` combines with the schedule.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from .layout import StageLayout

__all__ = ["StageEval", "eval_stage"]

KEEP, RECOMPUTE, SWAP = "keep", "recompute", "swap"
_INF = float("inf")


@dataclass(slots=True)
class StageEval:
    """Action-dependent figures of one stage, per micro-batch unless noted (the search makes
    one per stage it evaluates: slots, and the detail-only fields default to an empty tuple)."""

    fwd_s: float  # compute time of one micro-batch's forward
    bwd_s: float  # of its backward, incl. recompute and swap stalls
    bwd_compute_s: float  # backward compute only (no stalls)
    stall_s: float
    bwd_node_end: list  # local node x -> end offset of B_x inside the backward op
    host_s: float  # host-copy stream busy per micro-batch
    swap_bytes: int  # bytes swapped out per micro-batch
    base: int  # resident: params + optimizer state (+ batch input)
    params: int
    optimizer: int
    R: int  # retained bytes of one in-flight micro-batch
    maxF0: int
    maxB0: int
    maxF: int
    maxB: int
    argF0: int
    argB0: int
    argF: int
    argB: int
    S_fwd: int
    S_after: int
    opt_mem: int
    # detail only:
    carried: list = ()  # per local phase (mb buffers)
    step: list = ()
    trans: list = ()
    swap_live: list = ()  # prefetched swap bytes carried per phase
    copy_out: list = ()  # (start, end) offsets from F op start, per swapped node
    prefetch: list = ()  # (start, end) offsets from B op start


class _Keep:
    """A layout's all-keep figures and the per-node / per-group tables the fast path corrects
    them with (action-independent; built once per layout by :func:`_prepare`)."""

    __slots__ = ("kv", "kv0", "R", "groups", "touch_swap", "touch_rec", "rec_dtrans", "cpu_swap_dtrans",
                 "cpu_swap_dtrans_b",
                 "end_f", "bt_keep", "bt_rec", "fwd_s", "bwd_s", "step", "S_fwd", "S_after", "keep_peaks",
                 "keep_node_end")


def _suffix_sums(times: list) -> list:
    """Per node x, times[m-1] + ... + times[x], added from the end (as the backward runs)."""
    return list(accumulate(reversed(times), initial=0.0))[:0:-1]


def _peaks(m: int, kv: list, kv0: list, d: list) -> tuple:
    """(maxF0, argF0, maxF, argF, maxB0, argB0, maxB, argB): the F and B halves' largest bytes
    and first phase — all-keep carried + transient bytes ``kv`` (``kv0``: with the per-step
    buffers) plus the running sum of the corrections ``d``."""
    acc = 0
    maxF0 = maxF = -1
    argF0 = argF = 0
    for p in range(m):
        acc += d[p]
        v = kv[p] + acc
        if v > maxF:
            maxF, argF = v, p
        v = kv0[p] + acc
        if v > maxF0:
            maxF0, argF0 = v, p
    maxB0 = maxB = -1
    argB0 = argB = m
    for p in range(m, 2 * m):
        acc += d[p]
        v = kv[p] + acc
        if v > maxB:
            maxB, argB = v, p
        v = kv0[p] + acc
        if v > maxB0:
            maxB0, argB0 = v, p
    return maxF0, argF0, maxF, argF, maxB0, argB0, maxB, argB


def _prepare(L: StageLayout) -> _Keep:
    """All-keep liveness of the per-micro-batch groups, the per-step part, and per node the
    groups its action touches and the transient it sets (cached on the layout as ``L._keep``)."""
    K = _Keep()
    m = L.m
    P = 2 * m + 2
    d = [0] * (P + 1)
    trans0 = list(L.trans)
    R = 0
    xg = [[] for _ in range(m)]
    fg = [[] for _ in range(m)]
    groups = [None] * len(L.g_bytes)
    dst = [0] * (P + 1)
    S_fwd = S_after = 0
    for i in range(len(L.g_bytes)):
        nb, la, lf = L.g_bytes[i], L.g_alloc[i], L.g_free[i]
        if L.g_step[i]:  # one copy per step: action-independent
            if la + 1 < lf:
                dst[la + 1] += nb
                dst[min(lf, P)] -= nb
            if la <= m - 1 and lf > m - 1:
                S_fwd += nb
            if la <= 2 * m - 1 and lf >= 2 * m:
                S_after += nb
            continue
        # the group's all-keep contribution, as the fast path removes it: interval [lo, hi) of
        # dnb bytes, xnb bytes counted in phase xi, rnb retained bytes
        lo, hi = (la + 1 if la >= 0 else 0), min(lf, P)
        dnb = nb if la + 1 < lf else 0
        extra = L.g_extra[i]
        xi, xnb = (lf, nb) if extra else (0, 0)
        late = L.g_late[i]
        rnb = nb if (not late and la <= m - 1 and lf >= m) else 0
        d[lo] += dnb
        d[hi] -= dnb
        trans0[xi] += xnb
        R += rnb
        x = L.g_xnode[i]
        groups[i] = (nb, la, lf, extra, late, x, L.g_hold[i], L.g_fusers[i], lo, hi, dnb, xi, xnb, rnb,
                     L.g_holders[i])
        if x >= 0:
            xg[x].append(i)
        for u in L.g_fusers[i]:
            fg[u].append(i)
    carried, acc = [], 0
    for p in range(2 * m):
        acc += d[p]
        carried.append(acc)
    step, acc = [], 0
    for p in range(2 * m + 1):
        acc += dst[p]
        step.append(acc)
    K.kv = [carried[p] + trans0[p] for p in range(2 * m)]
    K.kv0 = [K.kv[p] + step[p] for p in range(2 * m)]
    K.R, K.groups = R, groups
    K.step, K.S_fwd, K.S_after = step, S_fwd, S_after
    # the groups a node's action changes: swapped, the buffers it saves (made or read); recomputed,
    # those it makes and the inputs its forward reads that would otherwise be freed before its backward
    K.touch_swap = [tuple(g) for g in xg]
    K.touch_rec = [tuple([i for i in xg[x] if groups[i][1] == x] + [i for i in fg[x] if groups[i][2] < 2 * m - 1 - x])
                   for x in range(m)]
    # the change of B_x's transient when x is recomputed: its forward's transient runs there
    # again, and the outputs it saves itself are re-made beside the originals
    K.rec_dtrans = [0] * m
    for x in range(m):
        j = 2 * m - 1 - x
        K.rec_dtrans[x] = max(trans0[j], L.fwd_trans[x] + (trans0[j] - L.trans[j])) + L.redo_out[x] - trans0[j]
    # ... and of F_x's and B_x's when x is swapped on the CPU (packed to host as saved, back on demand)
    st = L.swap_trans
    if st is not None:
        K.cpu_swap_dtrans = [st[x] - L.trans[x] for x in range(m)]
        K.cpu_swap_dtrans_b = [st[2 * m - 1 - x] - L.trans[2 * m - 1 - x] for x in range(m)]
    else:
        K.cpu_swap_dtrans = [max(0, trans0[x] - L.x_made[x]) - trans0[x] for x in range(m)]
        K.cpu_swap_dtrans_b = [0] * m
    ft, bt = L.fwd_time, L.bwd_time
    end_f, t = [], 0.0
    for x in range(m):
        t += ft[x]
        end_f.append(t)
    K.end_f = end_f
    K.bt_keep = [bt[x] + 0.0 for x in range(m)]  # as the full path adds them (bit for bit)
    K.bt_rec = [bt[x] + ft[x] for x in range(m)]
    K.fwd_s, K.bwd_s = sum(ft), sum(bt)
    K.keep_peaks = _peaks(m, K.kv, K.kv0, [0] * (2 * m))
    K.keep_node_end = _suffix_sums(K.bt_keep)
    L._keep = K
    return K


def eval_stage(L: StageLayout, actions: tuple, *, dp: int, shard: bool, opt_host: bool,
               input_bytes: int, opt_trans: int, host_bw: float, host_lat: float,
               detail: bool = False) -> StageEval:
    """Apply per-node actions and the stage's options to a layout (``input_bytes``: the batch
    inputs the stage's nodes read, per micro-batch).

    The fast path (``detail=False``) takes the layout's precomputed all-keep figures and
    corrects them for the non-keep nodes only: their transients, their swap copies' timeline,
    and the buffer groups they touch. ``detail=True`` walks every group (and also returns the
    curves). Both give the same figures (tested; times to rounding: the fast backward sum adds
    the recomputes last)."""
    if detail:
        return _eval_stage_full(L, actions, dp=dp, shard=shard, opt_host=opt_host, input_bytes=input_bytes,
                                opt_trans=opt_trans, host_bw=host_bw, host_lat=host_lat, detail=detail)
    try:
        K = L._keep
    except AttributeError:
        K = _prepare(L)
    m = L.m
    fwd_s, bwd_s = K.fwd_s, K.bwd_s
    stall = host_s = 0.0
    swap_bytes = 0
    has_swap = SWAP in actions
    has_rec = RECOMPUTE in actions
    if not (has_swap or has_rec):
        R = K.R
        maxF0, argF0, maxF, argF, maxB0, argB0, maxB, argB = K.keep_peaks
        node_end = list(K.keep_node_end)
    else:
        twom = 2 * m
        P = twom + 2
        d = [0] * (P + 1)  # corrections of the bytes in each phase, as differences (running sum)
        touched = []  # groups to correct (deduplicated below)
        btn = list(K.bt_keep)  # backward time of each node, with its recompute
        cpu = not L.prefetch_ahead
        end_f = K.end_f
        ft = L.fwd_time
        timed = cpu and has_swap and L.swap_fwd_time is not None  # swapped nodes' times measured, copies inline
        if timed:
            sft, sbt = L.swap_fwd_time, L.swap_bwd_time
            end_f, t = [], 0.0
            for x in range(m):
                if actions[x] == SWAP:
                    t += sft[x]
                    fwd_s += sft[x] - ft[x]
                    btn[x] = sbt[x] + 0.0
                    bwd_s += sbt[x] - L.bwd_time[x]
                else:
                    t += ft[x]
                end_f.append(t)
        # ---- forward scan: per-node transients and touched groups; swap copy-outs after F_x
        dur, copy_done = {}, {}
        host_free = 0.0
        for x in range(m):
            act = actions[x]
            if act == SWAP:
                touched += K.touch_swap[x]
                if cpu:
                    dt = K.cpu_swap_dtrans[x]
                    d[x] += dt
                    d[x + 1] -= dt
                    dt = K.cpu_swap_dtrans_b[x]
                    if dt:
                        j = twom - 1 - x
                        d[j] += dt
                        d[j + 1] -= dt
                nb = L.x_bytes[x]
                if nb > 0 and timed:  # copied out inside F_x and back inside B_x (their measured times)
                    copy_done[x] = end_f[x]
                    swap_bytes += nb
                elif nb > 0:
                    du = nb / host_bw + host_lat if host_bw != _INF else host_lat
                    dur[x] = du
                    e = end_f[x]
                    s0 = host_free if host_free > e else e
                    host_free = s0 + du
                    # on the CPU the pack hook copies inline, so the device copy is gone by the end of F_x
                    copy_done[x] = e if cpu else host_free
                    host_s += 2 * du
                    swap_bytes += nb
            elif act == RECOMPUTE:
                j = twom - 1 - x
                dt = K.rec_dtrans[x]
                d[j] += dt
                d[j + 1] -= dt
                bwd_s += ft[x]
                btn[x] = K.bt_rec[x]
                touched += K.touch_rec[x]
        # ---- backward: prefetches (GPU: one node ahead; CPU: on demand) and the stalls they cause
        if has_swap:
            tb0 = t = end_f[-1]
            phase_end = end_f + [0.0] * m
            node_end = [0.0] * m  # offset from the B op's start at which B_x ends
            if cpu:
                for x in range(m - 1, -1, -1):
                    if x in dur:
                        s0 = t
                        if host_free > s0:
                            s0 = host_free
                        c = copy_done[x]
                        if c > s0:
                            s0 = c
                        host_free = s0 + dur[x]
                        stall += host_free - t
                        t = host_free
                    t += btn[x]
                    phase_end[twom - 1 - x] = t
                    node_end[x] = t - tb0
            else:
                land = [-_INF] * m  # when a node's prefetch lands (-inf: none)
                if (m - 1) in dur:  # the stage's last node: prefetch when its backward op starts
                    s0 = host_free if host_free > t else t
                    host_free = s0 + dur[m - 1]
                    land[m - 1] = host_free
                for x in range(m - 1, -1, -1):
                    lx = land[x]
                    if lx > t:
                        stall += lx - t
                        t = lx
                    if x - 1 in dur:  # prefetch the next node's saved buffers when this backward starts
                        s0 = t
                        if host_free > s0:
                            s0 = host_free
                        c = copy_done[x - 1]
                        if c > s0:
                            s0 = c
                        host_free = s0 + dur[x - 1]
                        land[x - 1] = host_free
                    t += btn[x]
                    phase_end[twom - 1 - x] = t
                    node_end[x] = t - tb0
            # per swapped node: the first phase its copy-out lets its saved buffers leave the device
            # (-1: by the end of its forward), and the last before they are back (from the start of
            # B_{x+1}; of B_x for the stage's last node or on the CPU)
            gap = {}
            for x, c in copy_done.items():
                f1 = -1
                if c > end_f[x]:
                    j = x + 1
                    while j < twom and phase_end[j] < c:
                        j += 1
                    f1 = j + 1
                gap[x] = (f1, twom - 3 - x if (x < m - 1 and not cpu) else twom - 2 - x)
        else:
            node_end = _suffix_sums(btn)
        # ---- memory: correct the all-keep contribution of each touched group for its actual one
        R = K.R
        groups = K.groups
        for i in (set(touched) if has_rec else touched):  # (only recompute touches a group twice)
            nb, la, lf, extra, late, x, hold, fusers, lo, hi, dnb, xi, xnb, rnb, holders = groups[i]
            act = actions[x] if x >= 0 else KEEP
            if act == RECOMPUTE and la == x:  # made by x: x's checkpoint drops its hold, re-made in B_x;
                d[lo] -= dnb  # its other users still hold it: later forwards that read it, later
                d[hi] += dnb  # nodes that saved it (until their backward)
                R -= rnb
                end = hold
                for _y, u in holders:
                    if u > end:
                        end = u
                for u in fusers:  # a recomputed reader's checkpoint holds it until its backward
                    if actions[u] == RECOMPUTE and twom - 1 - u > end:
                        end = twom - 1 - u
                if end > la:
                    d[lo] += nb
                    d[end + 1] -= nb
                    if not late and la <= m - 1 and end >= m:
                        R += nb
                continue
            lf0 = lf
            if has_rec:  # inputs of recomputed nodes stay until their backward (their checkpoint holds them)
                for u in fusers:
                    if actions[u] == RECOMPUTE:
                        if lf < twom - 1 - u:
                            lf = twom - 1 - u
                            extra = False
                        if hold < twom - 1 - u:
                            hold = twom - 1 - u
            if lf == lf0:
                if act == SWAP:  # all-keep: carried from la + 1 to lf - 1 (lf: B_x) and retained
                    f1, a2 = gap[x]
                    for y, u in holders:
                        if actions[y] != SWAP:
                            if u > hold:
                                hold = u  # y keeps (or recomputes from) the device copy until B_y
                        elif not cpu:  # y swaps it too: back with y's prefetch (from B_{y+1}, or B_y)
                            ay = twom - 3 - y if y < m - 1 else twom - 2 - y
                            if ay < a2:
                                a2 = ay
                    if f1 <= hold:  # the device copy is held until its other uses are done
                        f1 = hold + 1
                    if f1 <= a2:  # else the copy-out is not done before it is needed back: stays
                        d[f1] -= nb  # off the device from phase f1 to a2
                        d[a2 + 1] += nb
                        if f1 <= m:  # gone by the end of the F half (at f1 == m: counted in it): not retained
                            R -= nb
                        elif hold < m and not late and la <= m - 1:
                            R -= nb  # (see below)
                    elif hold < m and not late and la <= m - 1:
                        R -= nb  # stays for this micro-batch; one waiting in flight has its copy out
                continue
            # held longer by a recomputed reader (swapped or not, it stays): all-keep out, actual in
            d[lo] -= dnb
            d[hi] += dnb
            if xnb:
                d[xi] -= xnb
                d[xi + 1] += xnb
            if la + 1 < lf:
                d[la + 1] += nb
                d[lf] -= nb
            if not late and la <= m - 1:
                R += nb - rnb
        maxF0, argF0, maxF, argF, maxB0, argB0, maxB, argB = _peaks(m, K.kv, K.kv0, d)
    params = L.P_sum
    opt = L.O_sum
    if shard and dp > 1:
        opt = -(-opt // dp)  # ZeRO-1: only the optimizer state is sharded
    if opt_host:
        opt = 0
    base = params + opt + input_bytes
    return StageEval(
        fwd_s=fwd_s, bwd_s=bwd_s + stall, bwd_compute_s=bwd_s, stall_s=stall, bwd_node_end=node_end,
        host_s=host_s, swap_bytes=swap_bytes, base=base, params=params, optimizer=opt,
        R=R + input_bytes,  # every in-flight micro-batch holds its own inputs (one copy is in base)
        maxF0=maxF0, maxB0=maxB0, maxF=maxF, maxB=maxB, argF0=argF0, argB0=argB0, argF=argF, argB=argB,
        S_fwd=K.S_fwd, S_after=K.S_after, opt_mem=K.step[2 * m] + opt_trans,  # (for a host step: the gradients alone)
    )


def _eval_stage_full(L: StageLayout, actions: tuple, *, dp: int, shard: bool, opt_host: bool,
                     input_bytes: int, opt_trans: int, host_bw: float, host_lat: float,
                     detail: bool = False) -> StageEval:
    m = L.m
    P = 2 * m + 2
    bk = [2 * m - 1 - x for x in range(m)]  # local index of B_x
    has_swap = SWAP in actions
    has_rec = RECOMPUTE in actions

    # ---- time: forward / backward phase durations, swap copy timeline (one micro-batch)
    ft = L.fwd_time
    bt_node = [L.bwd_time[x] + (L.fwd_time[x] if actions[x] == RECOMPUTE else 0.0) for x in range(m)]
    timed = not L.prefetch_ahead and has_swap and L.swap_fwd_time is not None
    if timed:  # on the CPU, swapped nodes' measured times (the copies run inline, inside them)
        ft = [L.swap_fwd_time[x] if actions[x] == SWAP else ft[x] for x in range(m)]
        bt_node = [L.swap_bwd_time[x] + 0.0 if actions[x] == SWAP else bt_node[x] for x in range(m)]
    fwd_s = sum(ft)
    bwd_compute = sum(bt_node)
    end_f = []
    t = 0.0
    for x in range(m):
        t += ft[x]
        end_f.append(t)
    phase_end = end_f + [0.0] * m  # completed below
    stall = 0.0
    host_s = 0.0
    swap_bytes = 0
    copy_done = {}
    copy_out, prefetch = [], []
    node_end = [0.0] * m  # offset from B-op start at which B_x ends
    cpu = not L.prefetch_ahead
    if has_swap:
        dur = {}
        host_free = 0.0
        for x in range(m):
            if actions[x] == SWAP and L.x_bytes[x] > 0 and timed:  # inside F_x, and back inside B_x
                copy_done[x] = end_f[x]
                copy_out.append((x, end_f[x] - ft[x], end_f[x]))
                swap_bytes += L.x_bytes[x]
            elif actions[x] == SWAP and L.x_bytes[x] > 0:
                d = L.x_bytes[x] / host_bw + host_lat if host_bw != float("inf") else host_lat
                dur[x] = d
                s0 = max(end_f[x], host_free)
                host_free = s0 + d
                # on the CPU the pack hook copies inline, so the device copy is gone by the end of F_x
                copy_done[x] = end_f[x] if cpu else host_free
                copy_out.append((x, s0, host_free))
                host_s += 2 * d
                swap_bytes += L.x_bytes[x]
        tb0 = fwd_s
        t = tb0
        if cpu:  # each node's tensors are copied back when its backward asks for them
            for x in range(m - 1, -1, -1):
                if x in dur:
                    s0 = max(t, host_free, copy_done[x])
                    host_free = s0 + dur[x]
                    prefetch.append((x, s0 - tb0, host_free - tb0))
                    stall += host_free - t
                    t = host_free
                elif x in copy_done:  # measured: copied back inside B_x, as the backward asks
                    prefetch.append((x, t - tb0, t + bt_node[x] - tb0))
                t += bt_node[x]
                phase_end[bk[x]] = t
                node_end[x] = t - tb0
        else:  # prefetched one node ahead on a side stream
            land = {}
            if (m - 1) in dur:  # the stage's last node: prefetch when its backward op starts
                s0 = max(t, host_free)
                host_free = s0 + dur[m - 1]
                land[m - 1] = host_free
                prefetch.append((m - 1, s0 - tb0, host_free - tb0))
            for x in range(m - 1, -1, -1):
                start = max(t, land.get(x, t))
                stall += start - t
                if x - 1 in dur:  # prefetch the next node's saved buffers when this backward starts
                    s0 = max(start, host_free, copy_done[x - 1])
                    host_free = s0 + dur[x - 1]
                    land[x - 1] = host_free
                    prefetch.append((x - 1, s0 - tb0, host_free - tb0))
                t = start + bt_node[x]
                phase_end[bk[x]] = t
                node_end[x] = t - tb0
    else:
        t = 0.0
        for x in range(m - 1, -1, -1):
            t += bt_node[x]
            node_end[x] = t
            phase_end[bk[x]] = fwd_s + t
    bwd_s = bwd_compute + stall

    # ---- memory
    trans = list(L.trans)
    trans[2 * m] = opt_trans  # the caller passes the gradients alone for a host step
    if cpu:  # a swapped node's saved tensors go to host as saved and come back as asked for
        for x in range(m):
            if actions[x] == SWAP:
                if L.swap_trans is not None:  # traced
                    trans[x], trans[bk[x]] = L.swap_trans[x], L.swap_trans[bk[x]]
                elif L.x_made[x] > 0:
                    trans[x] = max(0, trans[x] - L.x_made[x])
    if has_rec:
        for x in range(m):
            if actions[x] == RECOMPUTE:
                j = bk[x]
                trans[j] = max(trans[j], L.fwd_trans[x] + (trans[j] - L.trans[j])) + L.redo_out[x]
    dmb = [0] * (P + 1)
    dst = [0] * (P + 1)
    dsw = [0] * (P + 1) if detail else None
    R = 0
    S_fwd = 0
    S_after = 0
    gb, ga, gf, gx, gs, gl, ge = L.g_bytes, L.g_alloc, L.g_free, L.g_xnode, L.g_step, L.g_late, L.g_extra
    gfu, gh, gho = L.g_fusers, L.g_hold, L.g_holders
    for i in range(len(gb)):
        nb = gb[i]
        la = ga[i]
        lf = gf[i]
        if gs[i]:
            if la + 1 < lf:
                dst[la + 1] += nb
                dst[min(lf, P)] -= nb
            if la <= m - 1 and lf > m - 1:
                S_fwd += nb
            if la <= 2 * m - 1 and lf >= 2 * m:
                S_after += nb
            continue
        extra = ge[i]
        x = gx[i]
        hold = gh[i]
        no_retain = False
        act = actions[x] if x >= 0 else KEEP
        if has_rec and gfu[i]:  # inputs of recomputed nodes stay until their backward
            for u in gfu[i]:
                if actions[u] == RECOMPUTE:  # (its checkpoint holds them)
                    if lf < bk[u]:
                        lf = bk[u]
                        extra = False
                    hold = max(hold, bk[u])
        if act == RECOMPUTE and la == x:  # made by x: x's checkpoint drops its hold, re-made in B_x;
            # its other users still hold it: later forward readers and a recomputed reader's
            # checkpoint (in hold, set above), later nodes that saved it (until their backward)
            end = max([hold] + [u for _y, u in gho[i]])
            if end > la:
                dmb[la + 1] += nb
                dmb[end + 1] -= nb
                if not gl[i] and la <= m - 1 and end >= m:
                    R += nb
            continue
        if act == SWAP and x in copy_done:
            c = copy_done[x]
            if c <= end_f[x]:
                f1 = la
            else:
                j = x + 1
                while j < 2 * m and phase_end[j] < c:
                    j += 1
                f1 = j + 1
            # back from the start of B_{x+1} (B_x if last, or on the CPU) until B_x
            a2 = lf - 2 if (x < m - 1 and not cpu) else lf - 1
            for y, u in gho[i]:
                if actions[y] != SWAP:
                    hold = max(hold, u)  # y keeps (or recomputes from) the device copy until B_y
                elif not cpu:  # y swaps it too: back with y's prefetch (from B_{y+1}, or B_y if last)
                    a2 = min(a2, 2 * m - 3 - y if y < m - 1 else 2 * m - 2 - y)
            f1 = max(f1, hold + 1)  # the device copy is held until its other uses are done
            if f1 >= a2 + 1:  # copy-out not done before the prefetch: stays, for this micro-batch;
                if hold < m:  # a micro-batch waiting in flight has its copy out (released in the F half)
                    no_retain = True
            else:
                if f1 == m:  # completes in the last F phase: counted there, not retained
                    f1 = m - 1
                    if la < m - 1:
                        trans[m - 1] += nb
                if la + 1 < f1:
                    dmb[la + 1] += nb
                    dmb[f1] -= nb
                if a2 + 1 < lf:
                    dmb[a2 + 1] += nb
                    dmb[lf] -= nb
                    if detail:
                        dsw[a2 + 1] += nb
                        dsw[lf] -= nb
                if la <= m - 1 < f1 and hold >= m:  # a micro-batch waiting in flight has its copy
                    R += nb  # out unless the device copy is held past the F half anyway
                continue
        lo = la + 1
        if lo < lf:
            dmb[lo if lo > 0 else 0] += nb
            dmb[lf if lf < P else P] -= nb
        if extra:
            trans[lf] += nb
        if not gl[i] and la <= m - 1 and lf >= m and not no_retain:
            R += nb

    carried = []
    acc = 0
    for p in range(2 * m):
        acc += dmb[p]
        carried.append(acc)
    step = []
    acc = 0
    for p in range(2 * m + 1):
        acc += dst[p]
        step.append(acc)
    maxF0 = maxF = -1
    argF0 = argF = 0
    for p in range(m):
        v = carried[p] + trans[p]
        if v > maxF:
            maxF, argF = v, p
        v += step[p]
        if v > maxF0:
            maxF0, argF0 = v, p
    maxB0 = maxB = -1
    argB0 = argB = m
    for p in range(m, 2 * m):
        v = carried[p] + trans[p]
        if v > maxB:
            maxB, argB = v, p
        v += step[p]
        if v > maxB0:
            maxB0, argB0 = v, p

    params = sum(L.param_bytes)
    opt = sum(L.opt_bytes)
    if shard and dp > 1:  # ZeRO-1: only the optimizer state is sharded
        opt = -(-opt // dp)
    if opt_host:
        opt = 0
    base = params + opt + input_bytes
    ev = StageEval(
        fwd_s=fwd_s, bwd_s=bwd_s, bwd_compute_s=bwd_compute, stall_s=stall, bwd_node_end=node_end,
        host_s=host_s, swap_bytes=swap_bytes, base=base, params=params, optimizer=opt,
        R=R + input_bytes,  # every in-flight micro-batch holds its own inputs (one copy is in base)
        maxF0=maxF0, maxB0=maxB0, maxF=maxF, maxB=maxB, argF0=argF0, argB0=argB0, argF=argF, argB=argB,
        S_fwd=S_fwd, S_after=S_after, opt_mem=step[2 * m] + trans[2 * m],
    )
    if detail:
        ev.carried = carried + [0]
        ev.step = step
        ev.trans = trans
        sw, acc = [], 0
        for p in range(2 * m + 1):
            acc += dsw[p]
            sw.append(acc)
        ev.swap_live = sw
        ev.copy_out = copy_out
        ev.prefetch = prefetch
    return ev
