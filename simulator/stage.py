"""One pipeline stage's memory and time under per-node actions: :class:`StageModel`.

:meth:`StageModel.evaluate` applies the per-node actions (keep / recompute / swap / selective)
and the stage's options to a :class:`~simulator.layout.StageLayout` and returns a
:class:`StageEval`, the per-micro-batch figures :mod:`simulator.core` combines
with the schedule (:func:`stage_peak`: the stage's peak under a schedule).

Memory, per local phase, is the stage's buffer groups carried through it plus
the phase's transient bytes. :func:`_live` is the model of a buffer group: the phases
it is carried through, the bytes it adds to a phase's transient, the phases it
spends on the host (swapped) and whether an in-flight micro-batch retains it,
for the actions of the node that saves it and of the nodes that read it.
:func:`_transient_changes` is the model of what an action does to its own node's
transients. A group's liveness depends only on those nodes' actions, so the
evaluator takes the stage's all-keep figures (:class:`_KeepTables`, the same
model evaluated once per layout with every node kept, then cached) and, for the
groups and transients the non-keep nodes touch, takes out their all-keep share
and puts in their actual one. Time is one pass over the nodes: forwards, the
swap copies on the host stream, backwards with their recomputes and the stalls
the copies cause. ``detail=True`` returns the same figures with the per-phase
split the simulator's breakdown and memory curves draw.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import accumulate

from memflow.kinds import KEEP, RECOMPUTE, SELECTIVE, SHARD_GRADIENTS, SHARD_NONE, SHARD_PARAMETERS, SWAP

from .layout import StageLayout
from .zero3 import ELEMENT, Zero3Facts, comm_times, host_times, phase_values, state_terms, timeline

__all__ = ["StageModel", "StageEval", "stage_peak", "PEAK_PHASES"]

_INF = float("inf")
_CHECKPOINTED = (RECOMPUTE, SELECTIVE)  # actions whose checkpoint drops a node's hold and holds its inputs

#: Where a stage's peak can fall (:func:`stage_peak`): the first micro-batch's forward (F0) or
#: backward (B0, others in flight), the optimizer step (OPT), a forward while others are in flight
#: during the warm-up (Fwarm, per-step buffers of the F half) or in the steady state (Fsteady, the
#: first backward's per-step buffers alive), a later backward (Bj), the data-parallel gradient sync
#: (SYNC: a bucket's flat copy made beside the gradients, between two of the last micro-batch's
#: node backwards or after them; :mod:`memflow.buckets`).
PEAK_PHASES = ("F0", "B0", "OPT", "Fwarm", "Fsteady", "Bj", "SYNC")


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
    maxF0: int  # the F half's most bytes (carried + transient) with the per-step buffers, and its phase
    maxB0: int  # ... the B half's
    maxF: int  # ... without the per-step buffers
    maxB: int
    argF0: int
    argB0: int
    argF: int
    argB: int
    S_fwd: int  # per-step buffers carried through the F half
    S_after: int  # ... and once the first backward has made them (the steady state)
    opt_mem: int  # bytes above base in the optimizer step
    sync1: int  # ... at the gradient sync's most (0: no bucket copies), with 1 micro-batch
    syncN: int  # ... with more (every micro-batch's first backward has made the per-step buffers)
    # ZeRO-1 (sharded state, dp > 1): per data-parallel rank (base, optimizer state, opt_mem), its own
    # shard of the state and of the step; base / optimizer / opt_mem above are the worst rank's, so
    # stage_peak is the most any rank holds (empty: every rank alike)
    ranks: tuple = ()
    # detail only, per local phase (0 .. 2m): carried = mb buffers (swap_live included), step = per-step
    # buffers, trans = transient, swap_live = swapped buffers back on the device ahead of their backward
    carried: list = ()
    step: list = ()
    trans: list = ()
    swap_live: list = ()
    copy_out: list = ()  # (x, start, end) offsets from F op start, per swapped node
    prefetch: list = ()  # (x, start, end) offsets from B op start
    # per swapped node x: (x, the first local phase its copy-out lets its saved buffers leave the device;
    # -1: by the end of its forward), as the memory model frees them (memflow.fakeswap follows it)
    swap_leave: tuple = ()
    # per bucket copy: (x, bytes above base with 1 micro-batch, with more, phase whose live bytes it
    # sits on with 1, with more, its bytes); x: the node after whose backward it is made, phase 2m:
    # after the whole backward
    sync_points: list = ()
    # ZeRO-3, per micro-batch: seconds the forward and backward wait for gathers and reduce-scatters
    # (in fwd_s and bwd_s, not in stall_s: the host link's), and the comm stream's busy seconds
    comm_stall_s: float = 0.0
    comm_s: float = 0.0
    comm_ops: list = ()  # detail only: its collectives, (half, x, kind, start, seconds) (simulator.zero3.timeline)
    # a later micro-batch's B half (every gradient made already, in S_after; the new one added into it):
    # its most bytes without the per-step buffers, the phase, and what was cut there from that phase's
    # maxB figure (-1: as maxB); detail only, per local phase, the cut (StageLayout.bcut)
    maxBs: int = -1
    argBs: int = 0
    cutBs: int = 0
    bcut: list = ()


def stage_peak(ev: StageEval, inflight: int, microbatches: int, rank: tuple | None = None) -> tuple[int, str]:
    """``(bytes, phase)``: the peak of a stage whose per-micro-batch figures are ``ev`` when it holds
    up to ``inflight`` micro-batches of ``microbatches`` at once (:func:`memflow.schedule.inflight`),
    and where it falls (one of :data:`PEAK_PHASES`, the first of equals); ``rank``: one of
    ``ev.ranks`` (ZeRO-1: that rank's), else the worst rank's."""
    k, m = inflight, microbatches
    R = ev.R
    base, opt_mem = (ev.base, ev.opt_mem) if rank is None else (rank[0], rank[2])
    v, which = ev.maxF0, "F0"
    w = (k - 1) * R + ev.maxB0
    if w > v:
        v, which = w, "B0"
    if opt_mem > v:
        v, which = opt_mem, "OPT"
    if k >= 2:
        w = (k - 1) * R + ev.maxF + ev.S_fwd
        if w > v:
            v, which = w, "Fwarm"
    if m > k:
        w = (k - 1) * R + ev.maxF + ev.S_after
        if w > v:
            v, which = w, "Fsteady"
    if m >= 2:
        w = ((k - 1) if m > k else (k - 2)) * R + (ev.maxB if ev.maxBs < 0 else ev.maxBs) + ev.S_after
        if w > v:
            v, which = w, "Bj"
        if ev.syncN > v:
            v, which = ev.syncN, "SYNC"
    elif ev.sync1 > v:
        v, which = ev.sync1, "SYNC"
    return base + v, which


def _live(groups: list, idx, acts, has_rec: bool, gap, m: int, cpu: bool, dc, dt, dsw, sel_held=None,
          pd: int = 1, traced: bool = False, dfr=None, sel_btrans=None, sel_some=None, sel_ft=None,
          fheld=None, solo=None, rgap=None, srgap=None, drg=None) -> int:
    """Put the buffer groups ``groups[i]`` (``i`` in ``idx``; see :class:`_KeepTables`) under per-node
    actions ``acts`` in place of their all-keep shares (each tuple's last fields, :func:`_keep_share`):
    add the change to the per-phase differences ``dc`` (carried), ``dt`` (transient) and ``dsw``
    (swapped buffers back on the device; None: not wanted) and return the change of the bytes an
    in-flight micro-batch retains. ``gap[x]``: per swapped node x, the first phase its copy-out lets
    its saved buffers leave the device (-1: by the end of F_x) and the last before they are back (on a
    GPU from the start of B_{x+pd}, ``pd`` the prefetch depth, or of the backward's first node if
    x + pd is past the stage's last; on the CPU inside B_x). ``sel_held[i]``: whether group i is an
    output its maker y's selective policy holds (:attr:`StageLayout.g_selheld`): under ``selective``
    it lives to B_y whatever else holds or swaps it, freed inside it (its traced transient).
    ``traced``: a swapped node's transients are the CPU executor's, traced (its copies back inside them).
    ``sel_btrans``: per node, its traced selective backward transient (-1: untraced;
    :attr:`StageLayout.sel_btrans`); ``sel_ft``: per node, whether its selective forward is traced
    (:attr:`StageLayout.sel_ftraced`). ``fheld`` (None: not wanted): per forward phase x, the bytes of
    groups that die inside F_x with every node kept (in its traced transient) carried through it here.
    ``dfr`` (None: not wanted): per B-half phase, the change of the bytes alive as it starts that die in
    it (not carried through it; :attr:`_KeepTables.freed`), at least what is (a bound: see
    :func:`simulator.zero3.phase_values`). ``solo``: per group, :attr:`StageLayout.g_solo` (None: none);
    ``rgap``: :attr:`StageLayout.g_rgap` (None: none); ``srgap``: :attr:`StageLayout.g_srgap`, and ``drg`` (None: not
    wanted): per B-half phase, what a later micro-batch's peak there holds above the first one's of the groups
    ``rgap`` lets go before that phase's peak (its steady gap smaller)."""
    twom = 2 * m
    m1 = m - 1
    R = 0
    for i in idx:
        nb, la, lf, extra, late, x, hold, fusers, holders, cached, noswap, out, noback, p0, v0, p1, v1, q0, w0, q1, w1, \
            kr = groups[i]
        lf0 = lf if la < lf < m and not extra else -1  # (dies inside F_lf0 with every node kept)
        dc[p0] -= v0
        dc[p1] -= v1
        if w0:
            dt[q0] -= w0
            dt[q1] -= w1
        R -= kr
        if dfr is not None and m <= lf < twom and la < lf and not extra:  # (its all-keep share of freed)
            dfr[lf] -= nb
        act = acts[x] if x >= 0 else KEEP
        if noswap and act == SWAP:  # (too small for the pack hook: stays on the device, as kept)
            act = KEEP
        # held by its maker's selective policy to B_la - 1 (carried), freed in B_la: no swap moves it
        sel_end = twom - 2 - la if (out and sel_held is not None and 0 <= la < m and acts[la] == SELECTIVE
                                    and sel_held[i]) else -1
        if sel_end >= 0 and act == SWAP:
            act = KEEP
        # the layout's hold at m: sent forward (or relayed), its send buffer dropped as the micro-batch's backward
        # starts: on the device through the F half and while the micro-batch waits in flight, gone in B_x where
        # a swap brings back its copy or a recompute re-makes it (an LSTM stage: 4 KiB per micro-batch twice)
        sent = hold == m
        if has_rec and fusers:  # inputs of recomputed nodes stay through their backward (their checkpoint holds them)
            last = -1  # the reader whose checkpoint holds it last, where one holds it past its all-keep free
            for u in fusers:
                if acts[u] in _CHECKPOINTED:
                    sent = False
                    bu = twom - 1 - u
                    # (freed at B_u: inside its traced transient where u saved it; a value sent on, freed at
                    # B_{m-1} as the backward starts, is in no trace: carried through it, 512 bytes of
                    # GPT-NeoX's attention mask per micro-batch)
                    if lf < bu or (lf == bu and x != u):
                        lf, last = bu, u
                        extra = True
                    if hold < bu:
                        hold = bu
            if (last >= 0 and last == min(fusers) and acts[last] == SELECTIVE and sel_btrans is not None
                    and sel_btrans[last] >= 0 and (la >= 0 or (solo is not None and solo[i]))
                    and not (out and 0 <= la < m and ((sel_held is not None and sel_held[i])
                                                      or (sel_some is not None and 0 < sel_some[la])))):
                # its last holder is the first reader that holds it, selective: in the trace with every node
                # selective it died inside that backward too, in its traced transient, not beside it
                # (DistilBERT's blocks in bf16, whose linears save their inputs' casts: 8 KiB over a block);
                # not a value the stage received, whose earlier readers the trace held it for (ALiBi's
                # attention bias, made before the first block and read by every block, received by a later
                # stage whose first block is selective: 9 KiB under); nor an output its maker's policy holds
                # (to the maker's backward in that trace), or may hold where which is not told (StageLayout.sel_held
                # 0); one it does not hold died there too (a multi-scale encoder's running sum of upsampled
                # features, made beside a convolution whose output the policy holds, read by the selective head:
                # 512 KiB counted twice, 9% over); a value received that nothing before this stage but its maker
                # read, not held by the maker's policy, died there too (StageLayout.g_solo: a multi-scale encoder's
                # first sum of features, received for the third scale's sum: 512 KiB counted twice, 19% over)
                extra = False
        if act in _CHECKPOINTED and la == x:  # made by x: x's checkpoint drops its hold, re-made in B_x;
            # its other users still hold it: later forwards that read it, a recomputed reader's checkpoint
            # (in hold), later nodes that saved it (until their backward) unless they swap: their pack
            # hook moved their copy to the host, back on the CPU on demand inside B_y (its traced swapped
            # transient), on a GPU with y's prefetch (from B_{y+pd}, see gap) until B_y
            end, back = (m1 if sent else hold), None
            if sent and not late and la <= m1:
                R += nb
            if end < sel_end:
                end = sel_end
            if cached and act == RECOMPUTE and end < m1:  # (autocast's cache holds it to the F half's end)
                end = m1
            oend = kend = -1  # (the last of its holders' backwards: of the kept ones, of the others)
            for y, u in holders:
                if acts[y] != SWAP or noswap:
                    end = max(end, u)
                    if acts[y] == KEEP:
                        kend = max(kend, u)
                    else:
                        oend = max(oend, u)
                elif not cpu:
                    ay = twom - 2 - (y + pd if y + pd < m1 else m1)
                    # (back from the phase after ay, the last it is off the device)
                    back = (ay + 1, u) if back is None else (min(back[0], ay + 1), max(back[1], u))
                    # (y's pack hook holds the device tensor until y's copy out ends: a recomputed ReLU's
                    # output saved by the swapped max-pool after it, 98 MiB of ResNet-50 at batch 32)
                    fy = gap[y][0]
                    end = max(end, (y + 1 if fy < 0 else fy) - 1)
                    oend = max(oend, (y + 1 if fy < 0 else fy) - 1)
            # held last by a kept holder's backward, the others (and x's own holds) through before it: it goes with
            # that node's saved tensors there, before the phase's later peak (StageLayout.g_rgap, Buffer.read_gaps:
            # a TCN's last block selective, its output held by the kept head's saved slice alone, 12 KiB, 3.5% over
            # at the head's backward)
            split = ssplit = 0
            if (rgap is not None and rgap[i] and back is None and m <= end < twom and kend == end
                    and oend < end and end > (m1 if sent else hold) and end > sel_end):
                split = min(nb, next((g for q, g in rgap[i] if q == end), 0))
                if srgap is not None:
                    ssplit = min(nb, next((g for q, g in srgap[i] if q == end), 0))
            mine = sel_held is not None and sel_held[i]  # (the all-selective trace's maker held it to its backward)
            if (end == hold and la < end < m and not fusers and not holders and sel_ft is not None and not mine
                    and acts[end] == SELECTIVE and sel_ft[end]):
                # read last by a selective forward, no node holding it: it dies inside that forward, in its
                # traced transient (where the all-selective trace's maker dropped it too), not carried through
                # it (a few-shot encoder's ReLU output read by its average pool: 640 KiB counted twice)
                end -= 1
            elif (m <= end < twom and end != sel_end and not mine and sel_btrans is not None
                  and all(acts[h[0]] != SWAP for h in holders)):  # (a swapped holder's copy out may hold it)
                y = twom - 1 - end
                if (acts[y] == SELECTIVE and sel_btrans[y] >= 0 and y == min((*fusers, *(h[0] for h in holders)),
                                                                          default=-1)):
                    # held last by a selective node's checkpoint, the first of its readers to hold it: it dies
                    # inside that node's backward, in its traced transient as in the all-selective trace, not
                    # carried through it (the encoder's max-pool reading a ReLU output: 1.25 MiB counted twice)
                    end -= 1
                    split = 0
            if end > la:
                dc[la + 1] += nb
                if split:  # (carried to the phase before, beside that phase's kept transient less the gap)
                    dc[end] -= nb
                    dt[end] += nb - split
                    dt[end + 1] -= nb - split
                    if drg is not None and split > ssplit:  # (a later micro-batch's peak there comes sooner)
                        drg[end] += split - ssplit
                else:
                    dc[end + 1] -= nb
                if not late and la <= m1 and end >= m and not sent:
                    R += nb
            if back is not None and max(back[0], end + 1) <= back[1]:
                dc[max(back[0], end + 1)] += nb
                dc[back[1] + 1] -= nb
            continue
        retain = True
        if act == SWAP:
            f1, a2 = gap[x]
            if sent:
                hold = m1
            if cached and hold < m1:  # (the pack hook copied it; autocast's cache holds the device copy)
                hold = m1
            for y, u in holders:
                if acts[y] != SWAP:
                    if u > hold:
                        hold = u  # y keeps (or recomputes from) the device copy until B_y
                elif not cpu:  # y swaps it too: back with y's prefetch (from B_{y+pd}, see gap); one copy out,
                    # x's (the executor's CUDA swap keeps one record a tensor per micro-batch)
                    ay = twom - 2 - (y + pd if y + pd < m1 else m1)
                    if ay < a2:
                        a2 = ay
            f1c = x + 1 if f1 < 0 else f1  # (the phase its copy out has ended by)
            if f1 <= hold:  # the device copy is held until its other uses are done
                f1 = hold + 1
                if traced and la < hold < m and not sent and (hold == x or acts[hold] == SWAP and not cached):
                    # a swapped forward was its last use: it dies in F_hold, inside F_hold's traced transient,
                    # every node that saved it swapped, as in the all-swapped trace (a DenseNet block's input:
                    # counted twice, 2.7% over; a CNN's ReLU output saved by the ReLU and the conv after it, at
                    # that conv: 128 KiB each, 31% over with every node swapped); a value sent on lives on
                    # (Inception's pool output, saved by the stage's last conv: 60 KiB)
                    f1 = hold
                elif (cpu and m <= hold < twom and sel_btrans is not None and not (sel_held is not None and sel_held[i])
                      and not sent and sel_end < 0 and acts[twom - 1 - hold] == SELECTIVE
                      and sel_btrans[twom - 1 - hold] >= 0
                      and twom - 1 - hold == min((*fusers, *(h[0] for h in holders)), default=-1)
                      and all(acts[h[0]] != SWAP for h in holders)):
                    # held last on the device by a selective node's checkpoint, the first of its readers to hold
                    # it, its maker's policy not holding it: it dies inside that node's backward, in its traced
                    # transient as in the all-selective trace, as where its maker is recomputed (a TCN block's
                    # output, its maker swapped, read by the selective last block: 12 KiB counted twice)
                    f1 = hold
            if f1 <= a2:  # off the device from phase f1 to a2
                # a micro-batch waiting in flight has its copy out unless the device copy is held past the F
                # half (a value sent on: the link holds it until that micro-batch's backward starts; SegNet's
                # swapped max-pool indices, read on the next stage: 64 KiB per waiting micro-batch under)
                if not late and la <= m1 < f1 and (hold >= m or sent):
                    R += nb
                if f1 == m:  # the copy-out completes in the last F phase: counted there, not retained
                    f1 = m1
                    if la < m1:
                        dt[m1] += nb
                        dt[m] -= nb
                if la + 1 < f1:
                    dc[la + 1] += nb
                    dc[f1] -= nb
                if dfr is not None:  # (alive as f1 starts until its copy-out lets it go; back as lf starts)
                    if m <= f1 < twom and la < f1:
                        dfr[f1] += nb
                    if m <= lf < twom and a2 < lf and not noback:
                        dfr[lf] += nb
                if a2 + 1 < lf and not noback:
                    dc[a2 + 1] += nb
                    dc[lf] -= nb
                    if dsw is not None:
                        dsw[a2 + 1] += nb
                        dsw[lf] -= nb
                continue
            # the copy-out is not done before it is needed back: it stays, for this micro-batch; one
            # waiting in flight has its copy out (released in the F half) unless held past it anyway
            retain = hold >= m or sent
            if traced and hold < lf:  # its holders let it go before B_x, whose traced transient has the copy
                extra = False  # back (a stage's received input: counted twice, 4 KiB per LSTM micro-batch)
            if not cpu and f1c > lf + 1:  # its copy out ends after the phase it is freed in: the pack hook holds
                # the device tensor to then (in the phase it is freed in, a swapped x's backward is priced with
                # the saved tensors it frees held to its end: StageLayout.held_extra)
                dc[lf + 1] += nb
                dc[f1c] -= nb
                if dfr is not None and f1c < twom:
                    dfr[f1c] += nb
        if sel_end >= lf:
            if lf == twom - 1 - x and not extra and acts[x] != SWAP:  # it died in its saver x's backward, inside
                dt[lf] -= nb  # B_x's traced transient: now carried through it (4 KiB of Swin counted twice)
                dt[lf + 1] += nb
            lf, extra = sel_end + 1, False
        if la + 1 < lf:
            dc[la + 1] += nb
            dc[lf] -= nb
            if fheld is not None and 0 <= lf0 < lf:
                fheld[lf0] = fheld.get(lf0, 0) + nb
        if dfr is not None and m <= lf < twom and la < lf:  # (an extra too: alive as lf starts)
            dfr[lf] += nb
        if extra:  # also counted in its freeing phase (carried through it in reality)
            dt[lf] += nb
            dt[lf + 1] -= nb
        if retain and not late and la <= m1 and lf >= m:
            R += nb
    return R


def _keep_share(group: tuple, m: int) -> tuple:
    """What :func:`_live` adds for ``group`` (its share fields still zero) with every node kept, as
    ``(p0, v0, p1, v1, q0, w0, q1, w1, retained)``: ``v`` added at phases ``p`` of the carried
    differences, ``w`` at ``q`` of the transient ones (a carried interval and a transient phase at
    the most; unused pairs are ``(0, 0)``)."""
    dc, dt = defaultdict(int), defaultdict(int)
    r = _live([group], (0,), (KEEP,) * m, False, None, m, False, dc, dt, None)
    c, t = [pv for pv in dc.items() if pv[1]], [pv for pv in dt.items() if pv[1]]
    assert len(c) <= 2 and len(t) <= 2
    c += [(0, 0)] * (2 - len(c))
    t += [(0, 0)] * (2 - len(t))
    return (*c[0], *c[1], *t[0], *t[1], r)


def _replay_beside(L: StageLayout) -> list:
    """Per node x, the bytes alive when B_x starts that B_x frees, but for those x's own forward
    made (a recomputed x makes them again): what x's forward, run again at the start of B_x, runs
    beside — its inputs (held by its checkpoint; for a stage's first node, the received values),
    the gradients of its outputs. They are in B_x's traced transient, not in its carried bytes. What x
    made that no saved-tensor hook saw (no saver: a custom op's autograd keeps it on ``ctx``) outlives the
    checkpoint: the original stays beside the replay's copy. A gradient the stage received is dated to the
    F half's last phase, as if the last node had made it: it is beside that node's replay all the same (a
    recomputed last node on its stage: 61 KiB under, 3%, SpeechT5's encoder layer norm)."""
    m = L.m
    out = [0] * m
    for i, nb in enumerate(L.g_bytes):
        la, lf = L.g_alloc[i], L.g_free[i]
        if (m <= lf < 2 * m and la < lf and not (L.g_step[i] or L.g_extra[i])
                and (la != 2 * m - 1 - lf or L.g_unpacked[i] or L.g_late[i])):
            out[2 * m - 1 - lf] += nb
    return out


def _consumed_inputs(L: StageLayout) -> list:
    """Per node x, the bytes of its inputs that the all-keep trace frees during F_x (x's forward was
    their last reader: alive through F_x, so inside its traced transient, not carried). A recomputed
    x's checkpoint holds them until B_x, where they are counted as carried: the replay's traced
    forward transient must not count them a second time."""
    out = [0] * L.m
    for i, nb in enumerate(L.g_bytes):
        lf = L.g_free[i]
        if lf < L.m and L.g_alloc[i] < lf and lf in L.g_fusers[i] and not (L.g_step[i] or L.g_extra[i]):
            out[lf] += nb
    return out


def _transient_changes(L: StageLayout, trans_keep: list) -> tuple[list, list, list, list, list, list]:
    """Per node x, what its action does to its own phases' transient bytes (all-keep ``trans_keep``):
    ``(rec, cpu_f, cpu_b)`` — recomputed, B_x's grows to hold its forward's transient run again there
    (beside what B_x starts with and frees: :func:`_replay_beside`, and what B_x made before its first
    unpack set the replay off: ``pre_replay``; an output x saves itself is made
    again there, inside that traced forward's transient, the original having died with its readers'
    backwards: no second copy is counted); swapped on the CPU (packed to host as saved, back on demand), F_x's
    and B_x's become the traced ones, or, untraced, F_x's loses the bytes x made; ``rec_f``: recomputed,
    F_x's becomes its traced forward under the checkpoint (what it would save dies inside it);
    ``rec_cut``: recomputed, what a later micro-batch's B_x holds less (:attr:`StageLayout.bcut`: its
    gradients there already), where the kept backward's peak is above the replay's. The checkpoint holds
    every input x's forward read until the last of x's ops with saved tensors is through in B_x, where the
    kept backward frees each saved one as its own op's backward ends: B_x's peak is at least its traced one with those held (``rec_held_extra``; a loss
    head reading many features let each go before it made the next one's gradient, 16% under). ``replays``:
    per x, B_x's transient at its replay's peak (the selective one's bound)."""
    m = L.m
    rec = [0] * m
    rec_cut = [0] * m
    replays = [0] * m
    beside = _replay_beside(L)
    consumed = _consumed_inputs(L)
    held = L.rec_held_extra or [0] * m
    back = L.rdrop or [0] * (2 * m)  # (what the kept figure lets go that a recompute or a swap holds: given back)
    for x in range(m):
        j = 2 * m - 1 - x
        replay = beside[x] + L.pre_replay[x] + L.fwd_trans[x] - consumed[x] + (trans_keep[j] - L.trans[j])
        replays[x] = replay
        rec[x] = max(trans_keep[j] + back[j] + held[x], replay) - trans_keep[j]
        if L.bcut and replay < trans_keep[j] + back[j]:
            rec_cut[x] = min((L.rbcut or L.bcut)[x], trans_keep[j] + back[j] - replay)
    st = L.swap_trans
    if st is not None:
        cpu_f = [st[x] - L.trans[x] for x in range(m)]
        cpu_b = [st[2 * m - 1 - x] - L.trans[2 * m - 1 - x] for x in range(m)]
    else:
        cpu_f = [max(0, trans_keep[x] - L.x_made[x]) - trans_keep[x] for x in range(m)]
        cpu_b = [back[2 * m - 1 - x] for x in range(m)]
    rec_f = [min(0, L.ck_trans[x] - L.trans[x]) for x in range(m)]
    return rec, cpu_f, cpu_b, rec_f, rec_cut, replays


def _selective_changes(L: StageLayout, trans_keep: list, rec: list) -> list:
    """Per node x under ``selective``, what it does to B_x's transient bytes: B_x's traced transient with
    every node selective (on the same footing as B_x's kept one), or where the profile traced none a
    recompute's (:func:`_transient_changes`' ``rec``: the cheap ops' replay is part of the whole forward's,
    which also re-makes what the policy saved). Its saved bytes are carried until B_x by the caller. (The
    recompute's figure was a floor under the traced one while the traced one was under the fake run on
    wav2vec2's, T5's and Whisper's blocks, 8-40 KiB: the node-by-node figures' inputs held too long and a
    maker's partly held outputs, both fixed; the floor had GPT-2's block 48 KiB over, 1.3% at the peak.)"""
    m = L.m
    out = list(rec)
    # per x, what the all-selective trace carried through B_x that the all-keep one frees there: outputs
    # of earlier nodes whose policy holds them to their own backward, saved by x (a selective x beside a
    # kept maker frees them in B_x: Swin's block, 4 KiB under). A maker whose policy holds some of its
    # outputs, not all, may hold this one: where the layout tells which (StageLayout.g_selheld, sel_held), those
    # alone (a multi-scale encoder's first convolution holds its output, not the downsampled image made beside
    # it: 12 KiB over at the next scale's first backward); elsewhere counted where its held bytes could be this
    # buffer's (at worst an over-count; Whisper's first convolution holds its output, not the 384 bytes beside
    # it, and the selective second one's backward was 16 KiB short of it beside the kept first)
    held = [0] * m
    for i, nb in enumerate(L.g_bytes):
        la, x = L.g_alloc[i], L.g_xnode[i]
        if (L.g_out[i] and 0 <= la < x and (L.g_selheld[i] if L.sel_held[la] else 0 < nb <= L.sel_held_some[la])
                and L.g_free[i] == 2 * m - 1 - x and not (L.g_extra[i] or L.g_step[i])):
            held[x] += nb
    for x, nb in enumerate(L.sel_recv):
        held[x] += nb
    for x in range(m):
        if L.sel_btrans[x] >= 0:
            j = 2 * m - 1 - x
            traced = (max(0, L.sel_btrans[x] - L.sel_bdrop[x]) if L.sel_bdrop else L.sel_btrans[x]) \
                + held[x] + (trans_keep[j] - L.trans[j])
            if L.sel_recv_ck and L.sel_recv_ck[x] and L.sel_hbtrans and L.sel_hbtrans[x] >= 0:
                # (received values its checkpoint alone held in the trace: carried here, and in that figure)
                traced -= max(0, L.sel_recv_ck[x] + L.sel_btrans[x] - L.sel_hbtrans[x])
            # a later stage's first node: the traced figure had its input as an earlier node's output, here it
            # is received; a recompute's replay counts the received values beside it (a spatial transformer cut
            # before its classifier's max-pool: 92 KiB under, 22.6%, by the traced figure alone)
            out[x] = traced - trans_keep[j] if x or L.first else max(traced - trans_keep[j], rec[x])
    return out


def _sel_carried(L: StageLayout, K, acts, dt) -> None:
    """Per selective x, what its traced backward frees of its inputs (:attr:`_KeepTables.sel_cand`) that a
    kept maker saved, so the plan carries that very tensor through B_x (x's checkpoint alone held it in the
    trace): counted carried and in the traced transient too; that backward's figure with its inputs held to
    its end (:attr:`StageLayout.sel_hbtrans`) bounds the two. Applied to ``dt`` (a CNN's kept block's ReLU
    output, saved by it and read by the selective block after it: 128 KiB counted twice, 13% over). (A
    swapped maker's copy back is another tensor, beside the one that dies: not bounded so.)"""
    m = L.m
    for x, cand in enumerate(K.sel_cand):
        h = L.sel_hbtrans[x]
        if not cand or acts[x] != SELECTIVE or h < 0 or L.sel_btrans[x] < 0 or not (x or L.first):
            continue  # (a later stage's first node may be priced as a recompute's replay: left as it is)
        j = 2 * m - 1 - x
        carried = sum(L.g_bytes[i] for i in cand if acts[L.g_alloc[i]] == KEEP)
        v = carried + L.sel_btrans[x] - h
        if v > 0:
            dt[j] -= v
            dt[j + 1] += v


def _swap_carried(L: StageLayout, K, acts, touched, has_rec: bool, gap, dt) -> None:
    """A swapped F_h on the CPU is priced at the all-swapped trace's transient, in which what F_h reads last
    dies (every saver's pack hook copied it to the host). Where this plan carries such a value through F_h
    (a reader's checkpoint or a kept saver holds it to a backward), it was counted twice: the forward's
    traced figure with what it frees held to its end bounds the two, for at most the bytes the trace freed
    there (a loss node reading a critic's features, swapped, beside recomputed readers: 192 KiB, 14% over)."""
    m = L.m
    tset = None
    for h in range(m):
        cand = K.swap_fcand[h]
        if acts[h] != SWAP or not cand:
            continue
        if tset is None:
            tset = set(touched)
        held = 0
        for i in cand:
            g = K.groups[i]
            p0, v0, p1, v1 = g[13], g[14], g[15], g[16]
            on = (v0 if p0 <= h else 0) + (v1 if p1 <= h else 0)  # (its all-keep share, carried at F_h)
            if i in tset:  # (what _live made of it under these actions, less that share)
                dci = defaultdict(int)
                _live(K.groups, (i,), acts, has_rec, gap, m, True, dci, defaultdict(int), None, L.g_selheld, 1,
                      True, None, L.sel_btrans, K.sel_open, L.sel_ftraced, None, L.g_solo, L.g_rgap)
                on += sum(v for p, v in dci.items() if p <= h)
            if on > 0:
                held += g[0]
        v = min(held, L.swap_ffreed[h]) - L.swap_hfdelta[h]
        if v > 0:
            dt[h] -= v
            dt[h + 1] += v


def _suffix_sums(times: list) -> list:
    """Per node x, times[m-1] + ... + times[x], added from the end (as the backward runs)."""
    return list(accumulate(reversed(times), initial=0.0))[:0:-1]


def _peaks(m: int, kv: list, kv0: list, d: list, fl: list | None = None) -> tuple:
    """(maxF0, argF0, maxF, argF, maxB0, argB0, maxB, argB, s1, sN): the F and B halves' largest
    bytes and first phase — all-keep carried + transient bytes ``kv`` (``kv0``: with the per-step
    buffers) plus the running sum of the changes ``d`` — and the gradient sync's most between node
    backwards (:func:`_sync_points`' v1, and vN less the per-step buffers) for the bucket copies
    ``fl`` (``fl[p]``: the bytes of the one made between phases p-1 and p; None for none: 0, 0)."""
    out = []
    acc = 0
    for lo, hi in ((0, m), (m, 2 * m)) if fl is None else ((0, m),):
        mx0 = mx = -1
        arg0 = arg = lo
        for p in range(lo, hi):
            acc += d[p]
            v = kv[p] + acc
            if v > mx:
                mx, arg = v, p
            v = kv0[p] + acc
            if v > mx0:
                mx0, arg0 = v, p
        out += (mx0, arg0, mx, arg)
    if fl is None:
        return (*out, 0, 0)
    mx0 = mx = -1  # the B half, and the sync's copies: each on what the phases either side hold (the smaller)
    arg0 = arg = m
    s1 = sN = pv = pv0 = 0
    for p in range(m, 2 * m):
        acc += d[p]
        v, v0 = kv[p] + acc, kv0[p] + acc
        if v > mx:
            mx, arg = v, p
        if v0 > mx0:
            mx0, arg0 = v0, p
        f = fl[p]
        if f:
            w = (v0 if v0 < pv0 else pv0) + f
            if w > s1:
                s1 = w
            w = (v if v < pv else pv) + f
            if w > sN:
                sN = w
        pv, pv0 = v, v0
    return (*out, mx0, arg0, mx, arg, s1, sN)


def _sync_points(flats: tuple, m: int, kv: list, kv0: list, run, S_after: int, inp: int) -> list:
    """Per bucket copy ``(x, bytes)`` of the stage's gradient sync (``flats``; :mod:`memflow.buckets`),
    ``(x, v1, vN, q1, qN, bytes)``: the bytes above the stage's base while the copy is made, with one
    micro-batch (``v1``) and with more (``vN``), and the phase ``q`` whose live bytes it sits on.
    Between B_x and B_{x-1} (the last micro-batch's: none other in flight) what is live is in both
    phases, so the smaller of the two (all-keep ``kv``; ``kv0`` with the per-step buffers; ``run``:
    the running sum of the actions' changes, None for none); after the backward (x = 0) the per-step
    buffers, the batch's inputs gone (q = 2m)."""
    out = []
    for x, flat in flats:
        if x == 0:
            v = S_after + flat - inp
            out.append((0, v, v, 2 * m, 2 * m, flat))
            continue
        j = 2 * m - 1 - x
        c0 = run[j] if run else 0
        c1 = run[j + 1] if run else 0
        a1, b1 = kv0[j] + c0, kv0[j + 1] + c1
        aN, bN = kv[j] + c0, kv[j + 1] + c1
        out.append((x, min(a1, b1) + flat, min(aN, bN) + S_after + flat, j if a1 <= b1 else j + 1,
                    j if aN <= bN else j + 1, flat))
    return out


def _hold_points(holds: tuple, m: int, kv: list, kv0: list, run, S_after: int, cut) -> list:
    """ZeRO-2's buckets in flight through phases, as :func:`_sync_points`' points: per ``(x, y, bytes)`` of
    ``holds`` (:meth:`StageModel.z2_holds`), each phase B_{x-1} .. B_y with those bytes on it; with more
    micro-batches (the last one syncs) less what that phase's node's backward finds made (``cut``, per
    local node as :func:`_steady_B`'s; None: nothing)."""
    out = []
    for x, y, h in holds:
        for q in range(2 * m - x, 2 * m - y):
            c = run[q] if run else 0
            k = 2 * m - 1 - q
            out.append((x, kv0[q] + c + h, kv[q] + c + S_after + h - (cut[k] if cut else 0), q, q, h))
    return out


def _sync_copies(flats, m: int) -> tuple:
    """``(copies, fl, end)`` of a stage's bucket copies ``(x, bytes)``: per node the largest (copies
    made one after another), the copy made between B_x and B_{x-1} at B_{x-1}'s phase (None: none)
    and the one made after the backward."""
    most: dict = {}
    for x, nb in flats:
        most[x] = max(most.get(x, 0), nb)
    copies = tuple(sorted(most.items(), reverse=True))
    fl = [0] * (2 * m + 1)
    for x, nb in copies:
        if x > 0:
            fl[2 * m - x] = nb
    return copies, (fl if any(fl) else None), most.get(0, 0)


def _running(base: list, d: list, n: int) -> list:
    """``base[p]`` plus the running sum of ``d`` up to ``p``, for ``p < n``."""
    out, acc = [], 0
    for p in range(n):
        acc += d[p]
        out.append(base[p] + acc)
    return out


def _input_extensions(deaths: tuple, early: tuple, actions: tuple, m: int, dc: list, early_swap: tuple = ()) -> int:
    """The batch inputs let go early (:attr:`StageLayout.input_deaths`) under ``actions``: a reader
    recomputed or selective holds what it reads (its checkpoint) to its own backward, so such an
    input is carried on to that phase (added to the carried changes ``dc``). One let go before its
    phase's peak (``early``, :attr:`StageLayout.input_early`) is counted through that phase again
    where a reader is not kept (a replay run with it), or swapped where the all-swapped trace did not
    let it go so too (``early_swap``, :attr:`StageLayout.input_early_swap`; a CPU's swap: a GPU's is
    untraced). Returns the bytes of them gone by the end of the F half (not held by an in-flight
    micro-batch)."""
    gone = 0
    for i, (nb, d0, readers) in enumerate(deaths):
        sw = bool(early_swap) and early_swap[i]
        if early and early[i] and any(actions[x] != KEEP and not (sw and actions[x] == SWAP) for x in readers):
            dc[d0] += nb
            dc[d0 + 1] -= nb
        d = d0
        for x in readers:
            if actions[x] in _CHECKPOINTED and 2 * m - 1 - x > d:
                d = 2 * m - 1 - x
        if d > d0:
            dc[d0 + 1] += nb
            dc[d + 1] -= nb
        if d < m:
            gone += nb
    return gone


def _steady_B(m: int, kv: list, d: list, cut: list) -> tuple:
    """``(maxBs, argBs, cut there)``: the B half's most bytes (without the per-step buffers) as a later
    micro-batch's backward holds them — the all-keep figures ``kv`` plus the running sum of the changes
    ``d``, less, per node x, ``cut[x]``: what of the gradients its backward makes are there already then
    (:attr:`StageLayout.bcut` kept, ``rec_bcut`` recomputed, ``sel_bcut`` selective, ``swap_bcut`` swapped on
    the CPU; on a GPU none swapped, taken as made anew)."""
    acc = 0
    for p in range(m):
        acc += d[p]
    mx, arg, c = -1, m, 0
    for p in range(m, 2 * m):
        acc += d[p]
        cx = cut[2 * m - 1 - p]
        v = kv[p] + acc - cx
        if v > mx:
            mx, arg, c = v, p, cx
    return mx, arg, c


class _KeepTables:
    """A layout's figures with every node kept (the model evaluated once, cached on its
    :class:`StageModel`), and per node the groups its action touches."""

    __slots__ = ("carried", "trans", "kv", "kv0", "R", "groups", "touch_swap", "touch_rec", "touch_sel", "rec_dtrans",
                 "rec_fdtrans", "sel_fdtrans",
                 "cpu_swap_dtrans", "cpu_swap_dtrans_b", "end_f", "bt_keep", "bt_rec", "fwd_s", "bwd_s", "step",
                 "sel_dtrans", "bt_sel", "sel_fheld", "sel_cand",
                 "S_fwd", "S_after", "keep_peaks", "keep_node_end", "freed", "bound", "inputs_gone", "keep_Bs", "rec_bcut",
                 "sel_bcut", "swap_fcand", "sel_open", "sel_early", "steady_wanted", "drg_wanted")

    def __init__(self, L: StageLayout):
        m = L.m
        P = 2 * m + 2
        dc = [0] * (P + 1)
        dt = [0] * (P + 1)
        R = 0
        xg = [[] for _ in range(m)]
        fg = [[] for _ in range(m)]
        og = [[] for _ in range(m)]  # per node, the groups of its outputs its selective policy holds (L.g_selheld)
        # per group: (bytes, alloc, free, extra, late, xnode, hold, fusers, holders, cached, noswap, out, noback) as
        # in the layout, then its all-keep share (_keep_share); None for the per-step groups
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
            x = L.g_xnode[i]
            g = (nb, la, lf, L.g_extra[i], L.g_late[i], x, L.g_hold[i], L.g_fusers[i], L.g_holders[i],
                 L.g_cached[i], L.g_noswap[i], L.g_out[i], L.g_noback[i])
            keep = _keep_share(g + (0,) * 9, m)
            groups[i] = g + keep
            p0, v0, p1, v1, q0, w0, q1, w1, kr = keep
            dc[p0] += v0
            dc[p1] += v1
            dt[q0] += w0
            dt[q1] += w1
            R += kr
            if x >= 0:
                xg[x].append(i)
            if L.g_out[i] and L.g_selheld[i] and 0 <= la < m:
                og[la].append(i)
            for u in L.g_fusers[i]:
                fg[u].append(i)
        for p, nb in enumerate(L.grad_first):  # (in the phase that made it too: no trace of it counts it there)
            dst[p] += nb
            dst[p + 1] -= nb
        self.inputs_gone = 0
        # (a batch input let go early: out of the carried bytes after its phase; let go before its phase's peak,
        # out of that phase's too: SegFormer's per-pixel labels, at its loss's backward, 1.6% over counted there)
        for (nb, d, _), early in zip(L.input_deaths, L.input_early or (False,) * len(L.input_deaths)):
            dc[d + 1 - early] -= nb
            if d < m:
                self.inputs_gone += nb
        self.carried = _running([0] * (2 * m), dc, 2 * m)
        self.trans = _running(L.trans, dt, 2 * m + 1)
        self.step = _running([0] * (2 * m + 1), dst, 2 * m + 1)
        self.kv = [self.carried[p] + self.trans[p] for p in range(2 * m)]
        self.kv0 = [self.kv[p] + self.step[p] for p in range(2 * m)]
        # per B-half phase p, the bytes alive as it starts (the phase before it done): carried through it
        # and what it frees (ZeRO-3's sync point after a unit's backward sits there)
        freed = [0] * (2 * m)
        for i, nb in enumerate(L.g_bytes):
            la, lf = L.g_alloc[i], L.g_free[i]
            if m <= lf < 2 * m and la < lf and not (L.g_step[i] or L.g_extra[i]):
                freed[lf] += nb
        self.freed = freed
        self.bound = [self.carried[p] + freed[p] for p in range(2 * m)]
        self.R, self.groups = R, groups
        self.S_fwd, self.S_after = S_fwd, S_after
        # the groups a node's action changes: swapped, the buffers it saves (made or read); recomputed,
        # those it makes and the inputs its forward reads that would otherwise be freed before its backward
        self.touch_swap = [tuple(g) for g in xg]
        # (one freed in B_x that x did not save: sent on from x's stage, in no trace of B_x; see _live)
        self.touch_rec = [tuple([i for i in xg[x] if groups[i][1] == x]
                                + [i for i in fg[x] if groups[i][2] < 2 * m - 1 - x
                                   or (groups[i][2] == 2 * m - 1 - x and groups[i][5] != x)]) for x in range(m)]
        # selective, with its policy holding outputs (L.sel_held): also those outputs, whoever frees them
        # (a group listed twice is corrected once: selective evaluations deduplicate what they touch)
        self.touch_sel = [self.touch_rec[x] + tuple(og[x]) if L.sel_held[x] else self.touch_rec[x] for x in range(m)]
        # per x, the groups its selective backward frees in the all-selective trace, its checkpoint their last
        # holder, that their maker saved: its inputs made on this stage, read first by x, no policy holding
        # them. A kept maker carries them through B_x: L.sel_hbtrans then bounds B_x (_sel_carried)
        cand = [[] for _ in range(m)]
        if L.sel_hbtrans:
            for i, nb in enumerate(L.g_bytes):
                fu = L.g_fusers[i]
                if (fu and 0 <= L.g_alloc[i] == L.g_xnode[i] < fu[0] < m
                        and not (L.g_step[i] or L.g_extra[i] or L.g_late[i] or L.g_selheld[i] or L.g_unpacked[i])):
                    cand[fu[0]].append(i)
        self.sel_cand = [tuple(c) for c in cand]
        # per x, ``(bytes, earlier readers)`` of the groups x reads and saves and frees in B_x with every node kept
        # that readers before x also read and save: their checkpoints held them past B_x in the all-selective trace
        early = [[] for _ in range(m)]
        if L.sel_btrans:
            for i, nb in enumerate(L.g_bytes):
                lf, fu = L.g_free[i], L.g_fusers[i]
                if m <= lf < 2 * m and not (L.g_step[i] or L.g_extra[i] or L.g_late[i]):
                    x = 2 * m - 1 - lf
                    us = tuple(u for u in fu if u < x)
                    if us and x in fu and L.g_xnode[i] == x:
                        early[x].append((nb, us))
        self.sel_early = tuple(tuple(e) for e in early) if any(early) else ()
        # per h, the groups the CPU's all-swapped trace frees inside F_h, in its traced transient: every node that
        # saves them swapped (host copies), F_h their last forward use, not sent on, not in autocast's cache. A
        # plan whose other holders keep one (a reader's checkpoint, a kept saver) carries it through a swapped
        # F_h too (see evaluate: L.swap_hfdelta bounds the two)
        fc = [[] for _ in range(m)]
        if L.swap_hfdelta:
            for i, nb in enumerate(L.g_bytes):
                h = L.g_hold[i]
                if (L.g_xnode[i] >= 0 and L.g_alloc[i] < h < m and not (L.g_step[i] or L.g_late[i] or L.g_cached[i]
                                                                        or L.g_noswap[i])
                        and not (L.g_extra[i] and L.g_free[i] < m)):  # (a received value's extra: in the B half)
                    fc[h].append(i)
        self.swap_fcand = [tuple(c) for c in fc]
        (self.rec_dtrans, self.cpu_swap_dtrans, self.cpu_swap_dtrans_b, self.rec_fdtrans, self.rec_bcut,
         replays) = _transient_changes(L, self.trans)
        ft, bt = L.fwd_time, L.bwd_time
        self.end_f = list(accumulate(ft, initial=0.0))[1:]
        self.bt_keep = [bt[x] + 0.0 for x in range(m)]
        self.bt_rec = [bt[x] + ft[x] for x in range(m)]
        for x in L.dead:  # (no backward runs through it: its checkpoint never replays; CANINE's unread
            # upsampling, recomputed, was priced with a replay the run never made: 27% over)
            self.rec_dtrans[x] = 0
            self.bt_rec[x] = bt[x] + 0.0
        self.sel_dtrans = _selective_changes(L, self.trans, self.rec_dtrans)
        # selective, what a later micro-batch's B_x holds less: its gradients accumulate into those already made,
        # as a kept node's do, where the backward's peak is past its replay (bounded by the whole forward's
        # replay, which its cheap ops' is not above: a transformer layer first on its stage, its parameters'
        # gradients counted anew for the second micro-batch, 8-9% over)
        # per node, the bytes of its outputs its selective policy holds where the layout could not tell which
        # (StageLayout.sel_held 0): any of its outputs may be one; elsewhere StageLayout.g_selheld tells
        self.sel_open = [s if not h else 0 for s, h in zip(L.sel_held_some, L.sel_held or [0] * m)]
        # (and no more than the traced selective backward's own cut, L.sel_scut: an EfficientNet block's peak
        # falls before a 160-channel norm's gradients are made, where the kept one's is past them, 1,280 B under)
        bc = L.rbcut or L.bcut  # (from the figure with a received value held that a kept node lets go: rdrop)
        sc = L.sel_scut or bc
        self.sel_bcut = [min(bc[x], sc[x], max(0, self.trans[2 * m - 1 - x] + self.sel_dtrans[x] - replays[x]))
                         for x in range(m)] if L.bcut else [0] * m
        # (above the kept one too: a selective GPT-2 head in bf16 holds its logits' matmul beside the loss)
        self.sel_fdtrans = [L.sel_ftrans[x] - L.trans[x] for x in range(m)] if L.sel_ftrans else [0] * m
        # per x, what x's forward reads last (freed in F_x with every node kept) that the all-selective trace
        # carried through F_x: held by its maker's policy (L.sel_held) or by another reader's checkpoint (a
        # reader that saves something). x's traced forward lacks those bytes; where none of the holders is
        # selective (the maker) or checkpointed (the readers) in the plan, they die inside F_x as with every
        # node kept. Per x: (maker y whose policy held it or -1, the other readers, bytes). (concat_grad's join
        # beside a kept linear: its output and, in bf16, the embedding the linear's checkpoint held, 64-96 KiB)
        fheld = [[] for _ in range(m)]
        if L.sel_ftrans:
            for i, nb in enumerate(L.g_bytes):
                y, x = L.g_alloc[i], L.g_free[i]
                if not (0 <= y < x < m) or L.g_extra[i] or L.g_step[i] or x in L.g_fusers[i]:
                    continue  # (x saves something: its own checkpoint holds what it reads, in the plan as traced)
                maker = y if L.g_out[i] and L.sel_held and (
                    L.g_selheld[i] if L.sel_held[y] else 0 < nb <= L.sel_held_some[y]) else -1
                # (a policy holding some of y's outputs may hold this one where the layout cannot tell which: at
                # worst counted where it was not held)
                readers = tuple(u for u in L.g_fusers[i] if u != x)
                if maker >= 0 or readers:
                    fheld[x].append((maker, readers, nb))
        self.sel_fheld = [tuple(f) for f in fheld]
        self.bt_sel = [bt[x] + L.sel_time[x] for x in range(m)]
        self.fwd_s, self.bwd_s = sum(ft), sum(bt)
        self.keep_peaks = _peaks(m, self.kv, self.kv0, [0] * (2 * m))[:8]
        self.keep_Bs = _steady_B(m, self.kv, [0] * (2 * m), L.bcut) if any(L.bcut) else None
        # whether a later micro-batch's backward is priced apart (a cut somewhere), and with read gaps to follow
        self.steady_wanted = self.keep_Bs is not None or bool(L.swap_bcut) or any(L.rbcut)
        self.drg_wanted = self.steady_wanted and any(L.g_rgap)
        self.keep_node_end = _suffix_sums(self.bt_keep)


def _piece(nbytes: int, dp: int, element: int = ELEMENT) -> int:
    """A rank's slice of a ZeRO-2 bucket of ``nbytes`` of ``element``-byte elements: the bucket padded to a
    multiple of ``dp`` elements (:mod:`memflow.executor.zero`), ``1/dp`` of it."""
    return -(-nbytes // (dp * element)) * element


class StageModel:
    """The memory and time model of one stage (see the module's docstring): its layout, the batch
    inputs its nodes read per micro-batch (``input_bytes``), the bytes above its state in its
    optimizer step (``opt_trans``; ``opt_grads``: the gradients alone, what stays on the device when
    the step runs on the host), the host link's latency, whether a swapped node's buffers come
    back one node ahead on a side stream (``prefetch_ahead``, as on a GPU) or when its backward asks
    for them (as on the CPU), and the flat copies its data-parallel gradient buckets make
    (``sync_flats``: ``(x, bytes)`` per bucket of several gradients, made after B_x;
    :mod:`memflow.buckets`), and what ZeRO-1 shares out among data-parallel ranks (``zero_params``:
    per parameter the optimizer steps, ``(bytes, optimizer-state bytes, step temporaries)``; the
    temporaries of a rank's step are its parameters' most, or with ``zero_sum`` their sum). The
    all-keep figures it corrects are built on its first evaluation and kept. ``z3``: its ZeRO-3
    units (:mod:`simulator.zero3`; None: one per node, no parameter kept whole)."""

    __slots__ = ("layout", "input_bytes", "opt_trans", "opt_grads", "host_lat", "prefetch_ahead", "sync_flats",
                 "zero_params", "zero_sum", "buckets", "bucket_elems", "zero_whole", "z2_state", "z3", "_keep", "_syncs", "_sync_keep", "_zero",
                 "_zero_eval", "_z2", "_z3", "_z3_times")

    def __init__(self, layout: StageLayout, *, input_bytes: int = 0, opt_trans: int = 0, opt_grads: int = 0,
                 host_lat: float = 0.0, prefetch_ahead: bool = True, sync_flats: tuple = (),
                 zero_params: tuple = (), zero_sum: bool = False, buckets: tuple = (), zero_whole: tuple = (),
                 z2_state: tuple = (0, 0), z3: Zero3Facts | None = None):
        self.layout = layout
        self.input_bytes = input_bytes
        self.opt_trans = opt_trans
        self.opt_grads = opt_grads
        self.host_lat = host_lat
        self.prefetch_ahead = prefetch_ahead
        # the bucket copies of an all-reduce (False: buckets of several gradients) and of ZeRO-2's
        # reduce-scatter (True: every bucket, ``buckets``: (x, bytes) each, flattened and padded in its
        # elements, ``bucket_elems``: their bytes each, 4 where a bucket says none; a complex64 bucket of an
        # odd element count padded as fp32 was 4 bytes a rank short)
        self.buckets = tuple((b[0], b[1]) for b in buckets)
        self.bucket_elems = tuple(b[2] if len(b) > 2 else ELEMENT for b in buckets)
        self.zero_whole = tuple(zero_whole)  # ZeRO-2: parameters other stages read too (stepped whole)
        # ZeRO-2: the optimizer state per byte a slice steps and per tensor it steps (AdamW: 2, its 4-byte
        # step count; simulator.layout.state_rate / state_counter); (0, 0): not known, an even share
        self.z2_state = tuple(z2_state)
        self._syncs = {False: _sync_copies(sync_flats, layout.m)}  # (ZeRO-2's by dp: sync_copies)
        self.sync_flats = self._syncs[False][0]
        self._z2: dict = {}  # dp -> ZeRO-2's (gradient slices, optimizer state, step temporaries) per rank
        self.zero_params = tuple(zero_params)
        self.zero_sum = zero_sum
        self._keep: _KeepTables | None = None
        self._sync_keep: dict = {}  # per copy set: the all-keep (sync1, syncN)
        self._zero: dict = {}  # dp -> ZeRO-1's (optimizer state, step's bytes above the state) per rank
        self._zero_eval: dict = {}  # dp -> the worst rank's (optimizer state, opt_mem) and StageEval.ranks
        if z3 is None:
            z3 = Zero3Facts(tuple((p, g, o) if g > 0 else (0, 0, 0) for p, g, o in
                                  zip(layout.param_bytes, layout.grad_bytes, layout.opt_bytes)),
                            tuple(() for _ in range(layout.m)), ())
        self.z3 = z3
        self._syncs["z3"] = _sync_copies([(x, nb) for x, nb, flat in z3.buckets if flat], layout.m)
        self._z3: dict = {}  # dp -> ZeRO-3's phase terms and (params, gradients in the step, state, temporaries)
        # ("ag", dp, comm) -> its units' (gather, reduce-scatter) seconds; ("host", dp, bw, latency) -> their
        # (copy-in, copy-out) seconds: alike for every action list a search evaluates the stage under
        self._z3_times: dict = {}

    def zero_shares(self, dp: int) -> tuple:
        """ZeRO-1 over ``dp`` ranks: per rank ``(optimizer state, optimizer step's bytes above it)``.
        ``ZeroRedundancyOptimizer`` gives each parameter, largest first, to the rank with the fewest
        elements so far; each rank holds its parameters' state and steps them: every gradient, and
        its parameters' temporaries. ``()`` without a parameter table (an even share then)."""
        z = self._zero.get(dp)
        if z is None:
            sizes, opt, temps = [0] * dp, [0] * dp, [0] * dp
            for pb, ob, t in sorted(self.zero_params, key=lambda p: -p[0]):
                r = sizes.index(min(sizes))
                sizes[r] += pb
                opt[r] += ob
                temps[r] = temps[r] + t if self.zero_sum else max(temps[r], t)
            z = self._zero[dp] = tuple((opt[r], self.opt_grads + int(temps[r])) for r in range(dp)) \
                if self.zero_params else ()
        return z

    def sync_copies(self, dp: int) -> tuple:
        """The gradient sync's bucket copies (:func:`_sync_copies`): an all-reduce's (``dp`` 0), or
        ZeRO-2's over ``dp`` ranks: every bucket is flattened beside its gradients, once the bucket
        before it is done (its copy freed, every earlier bucket down to its ``1/dp`` slice), so a
        copy adds its bytes less what the earlier buckets have shed."""
        c = self._syncs.get(dp)
        if c is None:
            net, shed = [], 0
            for (x, nb), el in zip(self.buckets, self.bucket_elems):
                piece = _piece(nb, dp, el)
                net.append((x, piece * dp - shed))
                shed += piece * dp - piece
            c = self._syncs[dp] = _sync_copies(net, self.layout.m)
        return c

    def z2_holds(self, dp: int) -> tuple:
        """ZeRO-2 over ``dp`` ranks: per bucket reduce-scattered during the backward, ``(x, y, bytes)``: what it
        adds to B_{x-1} .. B_y, the phases its reduce-scatter runs through (waited for when the next bucket
        starts, after B_y), above the gradients counted whole there — its flat copy stands in for its
        gradients, padded, with the slice it is reduced into beside it, less what the buckets before it have
        shed (each down to its slice). A Fourier operator's first bucket (its complex weights bucketed apart)
        ran 584 bytes above its plan through the next node's backward."""
        h = self._syncs.get(("hold", dp))
        if h is None:
            out, shed = [], 0
            for i, (x, nb) in enumerate(self.buckets):
                piece = _piece(nb, dp, self.bucket_elems[i])
                y = self.buckets[i + 1][0] if i + 1 < len(self.buckets) else 0
                v = piece * dp + piece - nb - shed
                if x > 0 and v > 0 and y < x:
                    out.append((x, y, v))
                shed += nb - piece
            h = self._syncs[("hold", dp)] = tuple(out)
        return h

    def zero2(self, dp: int) -> tuple:
        """ZeRO-2 over ``dp`` ranks (:mod:`memflow.executor.zero`), alike on every rank: ``(gradients
        in the optimizer step, optimizer state, the step's temporaries, padding)``. Each bucket's gradients
        are reduce-scattered into a ``1/dp`` slice (the bucket padded to a multiple of ``dp``); the
        rank steps its slice of every bucket: its state is ``1/dp`` of the stage's, and a
        one-tensor-at-a-time step's temporaries are those of its largest slice (the traced ones per
        byte of the largest parameter), a foreach step's ``1/dp`` of the stage's. The parameters are
        views of each bucket's flat buffer, padded too: ``padding`` is the bytes of zeros past them,
        held all through the step (a DistilBERT bucket of an odd element count was 4 bytes above
        its prediction at every phase with the optimizer on the host). Each slice is one tensor to the
        optimizer: its state is :attr:`z2_state`'s rate of its bytes and one step count (AdamW), not
        ``1/dp`` of the stage's parameters' counts (a ResNeXt's 90 bytes over at the gradient sync)."""
        z = self._z2.get(dp)
        if z is None:
            K = self._keep or _KeepTables(self.layout)
            m = self.layout.m
            whole = sum(nb for _, nb in self.buckets)
            pieces = [_piece(nb, dp, el) for (_, nb), el in zip(self.buckets, self.bucket_elems)]
            grads = K.step[2 * m] + self.opt_grads - whole + sum(pieces)
            wo = sum(ob for _, ob, _ in self.zero_whole)  # (replicas of parameters other stages read: whole)
            if self.zero_params and not self.zero_sum:
                rate = max(t / pb for pb, _, t in self.zero_params if pb)
                temps = int(rate * max(pieces + [pb for pb, _, _ in self.zero_whole], default=0))
            elif self.zero_params:
                wt = sum(t for _, _, t in self.zero_whole)
                temps = int((sum(t for _, _, t in self.zero_params) - wt) / dp + wt)
            else:  # (no parameter table: an even share of the step's bytes above the gradients)
                temps = max(0, self.opt_trans - self.opt_grads) // dp
            pad = sum(p * dp for p in pieces) - whole
            rate, counter = self.z2_state
            if rate:  # (each slice one tensor: its state per byte and one step count, not 1/dp of every parameter's)
                state = sum(rate * p + counter for p in pieces) + wo
            else:
                state = -(-(self.layout.O_sum + self.layout.O_gradless - wo) // dp) + wo
            z = self._z2[dp] = (grads, state, temps, pad)
        return z

    def zero3(self, dp: int, host: bool = False) -> tuple:
        """ZeRO-3 over ``dp`` ranks, alike on every rank: ``(terms, params, gradients in the optimizer
        step, optimizer state, the step's temporaries)`` (:func:`simulator.zero3.state_terms`);
        ``host``: the units' shards on the host (offload ``optimizer+parameters``)."""
        z = self._z3.get((dp, host))
        if z is None:
            L = self.layout
            K = self._keep or _KeepTables(L)
            z = self._z3[(dp, host)] = state_terms(self.z3, dp, L.m, L.P_sum, L.O_sum + L.O_gradless, K.step[2 * L.m],
                                                   self.opt_grads, self.opt_trans, self.zero_params, self.zero_sum,
                                                   host)
        return z

    def evaluate(self, actions: tuple, dp: int, shard: str, opt_host: bool, host_bw: float,
                 detail: bool = False, comm: tuple | None = None, params_host: bool = False,
                 prefetch: int = 1) -> StageEval:
        """The stage's :class:`StageEval` under per-node ``actions``, on ``dp`` data-parallel replicas,
        with its state sharded to level ``shard`` (:data:`memflow.kinds.Sharding`) or its optimizer on the host (``opt_host``) and ``host_bw``
        bytes/s of host link. ``detail`` adds the per-phase split and the swap copies' timeline.
        ``comm``: ``(bandwidth, latency, gloo)`` of the stage's data-parallel ring, for ZeRO-3's
        per-node collectives (None: not timed). ``params_host``: under ZeRO-3, the units' shards in
        host memory, copied in before each gather (:mod:`simulator.zero3`; implies ``opt_host``).
        ``prefetch``: on a GPU, how many nodes ahead of its backward a swapped node's copy back starts
        (:attr:`memflow.strategy.Strategy.prefetch`)."""
        pd = prefetch  # (the name below is the detail's list of prefetch copies)
        L = self.layout
        input_bytes = self.input_bytes
        opt_trans = self.opt_grads if opt_host else self.opt_trans
        host_lat = self.host_lat
        K = self._keep
        if K is None:
            K = self._keep = _KeepTables(L)
        inp_gone = K.inputs_gone  # (batch inputs let go in the F half; a checkpointed reader's: set below)
        m = L.m
        twom = 2 * m
        fwd_s, bwd_s = K.fwd_s, K.bwd_s
        stall = host_s = 0.0
        swap_bytes = 0
        has_swap = SWAP in actions
        has_rec = RECOMPUTE in actions or SELECTIVE in actions
        sel_R = 0  # bytes selective nodes hold for their backward, per micro-batch in flight
        copy_out = prefetch = None
        sync1 = syncN = 0
        z2 = dp > 1 and shard == SHARD_GRADIENTS
        z3 = shard == SHARD_PARAMETERS and (dp > 1 or params_host)  # (dp 1: only as parameter offload)
        ph = z3 and params_host
        copies, sync_fl, sync_end = self._syncs["z3"] if z3 else self.sync_copies(dp if z2 else 0)
        sync = dp > 1 and copies
        S_after = K.S_after
        if not (has_swap or has_rec or detail or z3):
            R = K.R
            maxF0, argF0, maxF, argF, maxB0, argB0, maxB, argB = K.keep_peaks
            steady = K.keep_Bs
            node_end = list(K.keep_node_end)
            if sync:
                sk = self._sync_keep.get(dp if z2 else 0)
                if sk is None:
                    pts = _sync_points(copies, m, K.kv, K.kv0, None, K.S_after, input_bytes)
                    if z2:
                        pts += _hold_points(self.z2_holds(dp), m, K.kv, K.kv0, None, K.S_after,
                                            L.bcut if K.keep_Bs is not None else None)
                    sk = self._sync_keep[dp if z2 else 0] = (max(p[1] for p in pts), max(p[2] for p in pts))
                sync1, syncN = sk
        else:
            P = twom + 2
            dc = [0] * (P + 1)  # changes of the carried bytes in each phase, as differences (running sum)
            # ... of the transient bytes (the same list unless split: ZeRO-3's sync points with actions need
            # the carried bytes, and the bytes alive as each B-half phase starts that die in it, dfr)
            split = detail or (z3 and (has_swap or has_rec))
            dt = [0] * (P + 1) if split else dc
            steady_wanted = K.steady_wanted
            dfr = [0] * (P + 1) if z3 and split else None
            # (per B-half phase, what a later micro-batch's peak holds above the first's: see _live)
            drg = [0] * (P + 1) if K.drg_wanted else None
            dsw = [0] * (P + 1) if detail else None
            if detail:
                copy_out, prefetch = [], []
            touched = []  # groups to correct (deduplicated below)
            btn = list(K.bt_keep)  # backward time of each node, with its recompute
            cpu = not self.prefetch_ahead
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
            x_bytes = L.x_bytes
            for x in range(m):
                act = actions[x]
                if act == SWAP:
                    touched += K.touch_swap[x]
                    if cpu:
                        v = K.cpu_swap_dtrans[x]
                        dt[x] += v
                        dt[x + 1] -= v
                        v = K.cpu_swap_dtrans_b[x]
                        if v:
                            j = twom - 1 - x
                            dt[j] += v
                            dt[j + 1] -= v
                    nb = x_bytes[x]
                    if nb > 0 and timed:  # copied out inside F_x and back inside B_x (their measured times)
                        copy_done[x] = end_f[x]
                        swap_bytes += nb
                        if detail:
                            copy_out.append((x, end_f[x] - sft[x], end_f[x]))
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
                        if detail:
                            copy_out.append((x, s0, host_free))
                elif act == RECOMPUTE:
                    j = twom - 1 - x
                    v = K.rec_dtrans[x]
                    dt[j] += v
                    dt[j + 1] -= v
                    v = K.rec_fdtrans[x]
                    if v:
                        dt[x] += v
                        dt[x + 1] -= v
                    bwd_s += ft[x]
                    btn[x] = K.bt_rec[x]
                    touched += K.touch_rec[x]
                elif act == SELECTIVE:  # a recompute that holds the expensive ops' outputs until B_x
                    j = twom - 1 - x
                    v = K.sel_dtrans[x]
                    dt[j] += v
                    dt[j + 1] -= v
                    v = K.sel_fdtrans[x]
                    for y, readers, nb in K.sel_fheld[x]:
                        if (y < 0 or actions[y] != SELECTIVE) and not any(actions[u] in _CHECKPOINTED for u in readers):
                            v += nb
                    if v:
                        dt[x] += v
                        dt[x + 1] -= v
                    v = L.sel_saved[x] - L.sel_held[x]  # (its held outputs: their groups live to B_x)
                    if v:
                        dc[x + 1] += v
                        dc[j] -= v
                        if dfr is not None:
                            dfr[j] += v
                        sel_R += v
                    bwd_s += L.sel_time[x]
                    btn[x] = K.bt_sel[x]
                    touched += K.touch_sel[x]
            # ---- backward: prefetches (GPU: one node ahead; CPU: on demand) and the stalls they cause
            gap = None
            if has_swap:
                tb0 = t = end_f[-1]
                phase_end = end_f + [0.0] * m
                node_end = [0.0] * m  # offset from the B op's start at which B_x ends
                if cpu:  # each node's tensors are copied back when its backward asks for them
                    for x in range(m - 1, -1, -1):
                        if x in dur:
                            s0 = t
                            if host_free > s0:
                                s0 = host_free
                            c = copy_done[x]
                            if c > s0:
                                s0 = c
                            host_free = s0 + dur[x]
                            if detail:
                                prefetch.append((x, s0 - tb0, host_free - tb0))
                            stall += host_free - t
                            t = host_free
                        elif detail and x in copy_done:  # measured: copied back inside B_x, as asked for
                            prefetch.append((x, t - tb0, t + btn[x] - tb0))
                        t += btn[x]
                        phase_end[twom - 1 - x] = t
                        node_end[x] = t - tb0
                else:  # prefetched ``pd`` nodes ahead on a side stream, one copy after another
                    land = [-_INF] * m  # when a node's prefetch lands (-inf: none)
                    for z in range(m - 1, max(m - 1 - pd, -1), -1):  # the last pd nodes: as the backward starts
                        if z in dur and copy_done[z] > t:
                            host_s -= dur[z]  # (still held: read where it is, see below)
                        elif z in dur:
                            s0 = host_free if host_free > t else t
                            host_free = s0 + dur[z]
                            land[z] = host_free
                            if detail:
                                prefetch.append((z, s0 - tb0, host_free - tb0))
                    for x in range(m - 1, -1, -1):
                        lx = land[x]
                        if lx > t:
                            stall += lx - t
                            t = lx
                        z = x - pd
                        if z in dur and copy_done[z] > t:
                            # its copy out has not ended as its prefetch is due: not copied back, its device
                            # tensor still held, read by its backward where it is (HostSwap.prefetch_one; the
                            # H200's swap-all GPT-2 ran its backward with six blocks' copies out in flight,
                            # where a prefetch waiting for the whole queue had them gone: 50% under mid-backward)
                            host_s -= dur[z]
                        elif z in dur:  # prefetch node x - pd's saved buffers when this backward starts
                            s0 = t
                            if host_free > s0:
                                s0 = host_free
                            host_free = s0 + dur[z]
                            land[z] = host_free
                            if detail:
                                prefetch.append((z, s0 - tb0, host_free - tb0))
                        t += btn[x]
                        phase_end[twom - 1 - x] = t
                        node_end[x] = t - tb0
                # per swapped node: the first phase its copy-out lets its saved buffers leave the device
                # (-1: by the end of its forward), and the last before they are back (see _live)
                gap = {}
                for x, c in copy_done.items():
                    f1 = -1
                    if c > end_f[x]:
                        j = x + 1
                        while j < twom and phase_end[j] < c:
                            j += 1
                        f1 = j + 1
                    gap[x] = (f1, twom - 2 - x if cpu else twom - 2 - (x + pd if x + pd < m - 1 else m - 1))
            else:
                node_end = _suffix_sums(btn)
            # ---- memory: the touched groups' all-keep share out, their actual one in
            R = K.R + sel_R
            if (has_rec or has_swap) and L.input_deaths:
                inp_gone = _input_extensions(L.input_deaths, L.input_early, actions, m, dc,
                                             L.input_early_swap if cpu and L.swap_trans is not None else ())
            fheld = {}
            R += _live(K.groups, set(touched) if has_rec else touched,  # (only recompute touches a group twice)
                       actions, has_rec, gap, m, cpu, dc, dt, dsw, L.g_selheld, pd, cpu and L.swap_trans is not None,
                       dfr, L.sel_btrans, K.sel_open, L.sel_ftraced, fheld, L.g_solo, L.g_rgap, L.g_srgap, drg)
            if has_swap and cpu and L.swap_hfdelta:
                _swap_carried(L, K, actions, touched, has_rec, gap, dt)
            for x, v in fheld.items():
                # what a kept F_x reads last, held on here (its maker's selective policy, a reader's checkpoint):
                # carried through F_x, and in its traced transient too; that forward's figure with all it frees
                # held bounds the two (fspool's sort reading a selective mixer's output: 48 KiB counted twice,
                # 10% over at F_x). Swapped on the CPU, the same with the all-swapped trace's figures (a feature
                # pyramid's second convolution, swapped, reading the selective first one's output: 64 KiB, 23%)
                if actions[x] == KEEP:
                    h = L.held_ftrans[x] if L.held_ftrans else -1
                    v += L.trans[x] - h
                elif actions[x] == SWAP and cpu and L.swap_trans is not None and L.swap_hfdelta:
                    h = 0
                    v -= L.swap_hfdelta[x]
                else:
                    continue
                if h >= 0 and v > 0:
                    dt[x] -= v
                    dt[x + 1] += v
            if has_rec and L.sel_hbtrans:
                _sel_carried(L, K, actions, dt)
            if has_rec and K.sel_early:
                for x, early in enumerate(K.sel_early):
                    # x saved it and frees it in its backward; in the all-selective trace an earlier reader's checkpoint
                    # held it past B_x: carried through B_x there, not in x's traced selective transient. Where no such
                    # reader is checkpointed here it dies in B_x: counted there (a BiLSTM's output, read by the kept
                    # scorer through a copy and held by the selective pooling's checkpoint: 20 KiB, 22%, under)
                    if early and actions[x] == SELECTIVE and L.sel_btrans[x] >= 0:
                        p = twom - 1 - x
                        for nb, us in early:
                            if not any(actions[u] in _CHECKPOINTED for u in us):
                                dt[p] += nb
                                dt[p + 1] -= nb
            if gap and not cpu and L.held_extra:
                # a swapped node whose copies to the host run past the start of its backward: its pack hook
                # holds each device tensor until its copy ends, not freed op by op as the trace frees them (a
                # 3D U-Net's last up-block: its 3.5 GiB saved beside its backward's gradients, 22% under)
                for x, (f1, _) in gap.items():
                    v = L.held_extra[x]
                    if v and actions[x] == SWAP and (x + 1 if f1 < 0 else f1) > twom - 1 - x:
                        dt[twom - 1 - x] += v
                        dt[twom - x] -= v
                        if dfr is not None:
                            dfr[twom - 1 - x] += v
            d = dc if not split else [a + b for a, b in zip(dc, dt)]
            fl = sync_fl if sync else None
            kv, kv0 = K.kv, K.kv0
            if z3:  # (the gathers, reduce-scatters and sync points in the phases' figures)
                if has_swap or has_rec:  # (per B-half phase, the bytes alive as it starts under the actions)
                    bound = [c + K.freed[p] + dfr[p] for p, c in enumerate(_running(K.carried, dc, twom))]
                else:
                    bound = K.bound
                kv, kv0, S_after = phase_values(self.zero3(dp, ph)[0], m, K.kv, K.kv0, K.S_after,
                                                list(accumulate(d[:twom])), input_bytes, bound)
                d = [0] * len(d)
            maxF0, argF0, maxF, argF, maxB0, argB0, maxB, argB, sync1, syncN = _peaks(m, kv, kv0, d, fl)
            steady = bcut = None
            # (ZeRO-2 too: the executor reduce-scatters only in the last micro-batch's backward, each bucket once
            # every node reading it is through, so a later micro-batch adds into the gradients the first made; taken
            # as made anew, a ResNeXt's ZeRO-2 ranks were 2-4% over at two micro-batches)
            if steady_wanted:
                # (swapped: the CPU executor's traced figure; a GPU's swap, untraced, takes them made anew)
                scut = L.swap_bcut if cpu and L.swap_trans is not None and L.swap_bcut else None
                bcut = [L.bcut[x] if a == KEEP else K.rec_bcut[x] if a == RECOMPUTE else K.sel_bcut[x]
                        if a == SELECTIVE else scut[x] if a == SWAP and scut else 0 for x, a in enumerate(actions)]
                if z3 and L.z3_bcut:  # (a unit's gradient is made anew each micro-batch; a weight read by several
                    # nodes or stages is held whole, its gradient accumulated there: a GRU decoder's second
                    # micro-batch was priced with its shared weights' gradients twice, 16% over; traced, of the
                    # cut only theirs, else the cut less the unit's: an AWD-LSTM's tied decoder 9% over so)
                    zs = L.z3_swap_bcut if scut else None
                    bcut = [min(c, zs[x] if a == SWAP and zs else L.z3_bcut[x]) for x, (c, a) in
                            enumerate(zip(bcut, actions))]
                elif z3:
                    bcut = [max(0, c - int(u[1])) for c, u in zip(bcut, self.z3.units)]
                if drg is not None:
                    # what a kept holder's backward lets go before its first micro-batch's peak and not before a later
                    # one's, whose gradients add in place (StageLayout.g_srgap): a Gumbel VQ-VAE's transposed conv,
                    # its input no longer held by the selective ReLU before it, 1,984 B under at the second
                    for p in range(m, twom):
                        if drg[p]:
                            bcut[twom - 1 - p] -= drg[p]
                steady = _steady_B(m, kv, d, bcut) if any(bcut) else None
            if detail and sync:
                run = list(accumulate(d))
                pts = _sync_points(copies, m, kv, kv0, run, S_after, input_bytes)
                if z2:
                    pts += _hold_points(self.z2_holds(dp), m, kv, kv0, run, S_after, bcut)
                sync1, syncN = max(p[1] for p in pts), max(p[2] for p in pts)
            elif sync:
                if fl is not None:
                    syncN += S_after
                if sync_end:
                    v = S_after + sync_end - input_bytes
                    if v > sync1:
                        sync1 = v
                    if v > syncN:
                        syncN = v
                holds = self.z2_holds(dp) if z2 else ()
                if holds:
                    for _, v1, vN, _, _, _ in _hold_points(holds, m, kv, kv0, list(accumulate(d)), S_after, bcut):
                        if v1 > sync1:
                            sync1 = v1
                        if vN > syncN:
                            syncN = vN
        zb = zstall = zcomm = 0.0  # ZeRO-3: the backward's waits for its collectives; all waits; comm busy
        cin = cout = None
        if ph:  # parameters on the host: each unit's shard copied in before each gather, its slice out
            key = ("host", dp, host_bw, host_lat)
            got = self._z3_times.get(key)
            if got is None:
                got = self._z3_times[key] = host_times(self.z3.units, dp, host_bw, host_lat, self.z3.low)
            cin, cout = got
            host_s += 2 * sum(cin) + sum(cout)
        if z3 and comm is not None:  # each unit's gathers and reduce-scatter on the comm stream
            key = ("ag", dp, comm)
            got = self._z3_times.get(key)
            if got is None:
                got = self._z3_times[key] = comm_times(self.z3.units, dp, *comm, self.z3.low)
            ag, rs = got
            fdur = [end_f[x] - (end_f[x - 1] if x else 0.0) for x in range(m)]
            bdur = [node_end[x] - (node_end[x + 1] if x + 1 < m else 0.0) for x in range(m)]
            zops = [] if detail else None
            f, tb, node_end = timeline(fdur, bdur, ag, rs, zops, cin, cout, not self.prefetch_ahead)
            zb = tb - bwd_s - stall
            zstall = f - fwd_s + zb
            zcomm = 2 * sum(ag) + sum(rs)
            fwd_s = f
        params = L.P_sum
        opt = L.O_sum
        opt_mem = K.step[twom] + opt_trans  # (for a host step: the gradients alone)
        step_opt = K.step[twom]
        ranks = ()
        if z3:  # ZeRO-3: each rank holds 1/dp of every unit (parameters, gradients, state, temporaries)
            _, params, g3, opt, temps = self.zero3(dp, ph)
            opt_mem = g3 + (0 if opt_host else temps)
            step_opt = min(step_opt, g3)
        elif z2:  # ZeRO-2: each rank holds and steps 1/dp of every bucket (its gradients, state, temporaries)
            g2, opt, temps, pad = self.zero2(dp)
            params += pad
            opt_mem = g2 + (0 if opt_host else temps)
            step_opt = min(step_opt, g2)
        elif shard != SHARD_NONE and dp > 1 and not opt_host:  # ZeRO-1: only the optimizer state and its step are sharded
            ze = self._zero_eval.get(dp)
            if ze is None:
                z, se = self.zero_shares(dp), K.step[twom]
                ze = self._zero_eval[dp] = (max(o for o, _ in z), max(o + t for o, t in z) + se,
                                            tuple((params + o + input_bytes, o, se + t - input_bytes)
                                                  for o, t in z)) if z else ()
            if ze:
                opt, opt_mem, ranks = ze
                opt_mem -= opt
            else:
                opt = -(-opt // dp)
        if opt_host:
            opt = 0
        base = params + opt + input_bytes
        # the batch is not on the device in the optimizer step: each micro-batch's inputs die with its
        # backward (memflow.executor.worker), while base counts one micro-batch's all through the step
        opt_mem -= input_bytes  # (ZeRO-1's per-rank figures: taken out where they are cached, above)
        ev = StageEval(  # (positional, in field order: the search makes many)
            fwd_s, bwd_s + stall + zb, bwd_s, stall, node_end, host_s, swap_bytes, base, params, opt,
            R + input_bytes - inp_gone,  # every in-flight micro-batch holds its own inputs (one copy is in base)
            maxF0, maxB0, maxF, maxB, argF0, argB0, argF, argB,
            K.S_fwd, S_after, opt_mem, sync1, syncN, ranks,
        )
        if steady is not None and steady[0] < maxB:
            ev.maxBs, ev.argBs, ev.cutBs = steady
        if z3:
            ev.comm_stall_s, ev.comm_s = zstall, zcomm
            if detail and comm is not None:
                ev.comm_ops = zops
        if detail:
            ev.carried = _running(K.carried, dc, twom) + [0]
            ev.step = list(K.step)
            ev.trans = _running(K.trans, dt, twom + 1)
            if z3:  # (the phases' figures as counted: what is not carried is transient)
                for p in range(twom):
                    ev.trans[p] = kv[p] - ev.carried[p]
                    ev.step[p] = kv0[p] - kv[p]
            ev.step[twom] = step_opt - input_bytes
            ev.trans[twom] = opt_mem + input_bytes - step_opt
            ev.swap_live = _running([0] * (twom + 1), dsw, twom + 1)
            ev.bcut = [0] * twom
            if ev.maxBs >= 0:
                for x in range(m):
                    ev.bcut[twom - 1 - x] = bcut[x]
            ev.copy_out = copy_out
            ev.prefetch = prefetch
            ev.swap_leave = tuple((x, g[0]) for x, g in sorted(gap.items())) if gap else ()
            if sync:
                ev.sync_points = pts
        return ev
