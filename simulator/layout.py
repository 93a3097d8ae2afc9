"""The graph-level view of one pipeline stage (nodes ``a .. b-1``): :func:`build_layout`.

A stage sees its own *local phases* for one micro-batch::

    0 .. m-1        forward of nodes a .. b-1          (F half)
    m .. 2m-1       backward of nodes b-1 .. a         (B half)
    2m              the optimizer step                 (OPT)
    2m+1            "after the step"

Global phase ``p`` maps to a local index monotonically, so for a single
stage holding every node the local phases *are* the graph's phases and the
liveness below is :func:`memflow.graph.record.replay` by construction.

:class:`StageLayout` (built once per node range, independent of actions and
cluster) turns every buffer the stage touches into a local interval
``(alloc, free)`` with the record's convention (carried through phase ``p``
iff ``alloc < p < free``):

* owned buffers keep their phases; one freed on another stage lives until its
  last local use, or until the stage sends it (end of the F half for
  activations, end of the B half for gradients), and is counted in that phase;
* received buffers arrive before the F half (activations) or before the B
  half (gradients) and live until their last local use / local free;
* relayed buffers (produced before the stage and used after it) live through
  the F half (B half for gradients);
* parameter gradients and buffers that outlive the B half are *step* buffers:
  one copy per step, not per micro-batch.

Buffers with the same interval and flags form one *group*. What per-node
actions do to them is :mod:`simulator.stage`'s.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations

from memflow.graph.record import KIND_GRAD, TaskGraph
from memflow.kinds import MIN_SWAP_BYTES

__all__ = ["StageLayout", "build_layout"]


@dataclass
class StageLayout:
    """The graph-level, action-independent view of stage ``[a, b)``."""

    a: int
    b: int
    m: int  # nodes in the stage
    # buffer groups (parallel lists): bytes, local alloc, local free, flags
    g_bytes: list
    g_alloc: list
    g_free: list
    g_extra: list  # True: also counted in phase g_free (carried through it in reality)
    g_step: list  # one copy per step (parameter grads, buffers outliving the B half)
    g_grad: list  # kind grad (parameter gradients)
    g_late: list  # arrives for the B half (received gradients): not a retained activation
    g_xnode: list  # local node whose swap moves it to host (see _swapped_by), else -1
    g_hold: list  # ... and the last local phase it is held on the device anyway (besides B_xnode)
    g_holders: list  # ... and (y, B_y) of later nodes whose backward reads it: held until B_y unless y swaps
    g_fusers: list  # local nodes whose forward reads it and saves some tensor (tuple): their checkpoint or swap can hold it
    # autocast's bf16 cast of a parameter (Buffer.cast) made by its saver's forward: autocast's cast cache
    # holds it until the stage's forward of the micro-batch ends, whatever the saver's checkpoint or swap
    # does (a recomputed or swapped node's casts outlive its forward; a selective one runs uncached)
    g_cached: list
    g_noswap: list  # too small for a swap's pack hook to move (MIN_SWAP_BYTES): stays on the device
    g_out: list  # an output of the node that made it (g_alloc), read by a later node's forward
    # an output its maker's selective policy holds to the maker's backward (see sel_held)
    g_selheld: list
    # held for a backward by the graph itself, not through a saved-tensor hook (Buffer.packed false: a custom
    # op's autograd keeps it on ctx): it has no saver, so no action moves it; a recompute's replay makes a
    # second copy beside it
    g_unpacked: list
    # the part of a swapped storage its saver's backward does not read (Buffer.views): copied out with the
    # views it reads (their bytes), never copied back (memflow.graph.actions.storage_piece)
    g_noback: list
    # received, freed in a forward here, and read before this stage by its maker alone, whose selective policy is
    # known not to hold it (:func:`_maker_holds`): in the step with every node selective only this stage's readers
    # held it
    g_solo: list
    # per group, ``(local backward phase, gap)`` where its buffers are read and outlive the phase in the trace: the
    # least of their Buffer.read_gaps (a holder's kept backward that is its last on this plan lets it go with the
    # reading node's saved tensors, before the phase's later peak)
    g_rgap: list
    # ... and per group the same from the steady peaks (Buffer.steady_read_gaps: a later micro-batch's backward)
    g_srgap: list
    trans: list  # per local phase transient bytes (node transients; OPT share set by caller)
    fwd_time: list  # per local node
    bwd_time: list
    fwd_trans: list  # per local node, F transient as a recompute replays it (up to its last saved tensor)
    ck_trans: list  # per local node, F_x's transient under its checkpoint (it keeps nothing; untraced: F_x's kept)
    pre_replay: list  # per local node, what B_x has made when its replay runs (its first unpack)
    param_bytes: list
    grad_bytes: list
    opt_bytes: list
    # per local node: the gradient bytes of each parameter it owns (reads first) that no other stage
    # reads, in its order: what a data-parallel all-reduce syncs in buckets (memflow.buckets); a
    # parameter other stages read too is summed in place over a group of its own
    dp_grads: list
    # ... less the parameters the step gives no gradient (an encoder's unread pooler): the all-reduce's
    # buckets leave them out (memflow.executor.grads); ZeRO's flat layouts hold every one
    ddp_grads: list
    # per local node, the dtype kind of each of dp_grads' / ddp_grads' gradients (memflow.buckets.dtype_kind):
    # a bucket holds one kind
    dp_kinds: list
    ddp_kinds: list
    x_bytes: list  # per local node: bytes its swap copies to host (every buffer it saves, made or read,
    # also one an earlier node's backward frees: each node's pack hook copies its own; of a buffer its
    # backward reads only views of, those views)
    x_made: list  # ... of which made in its forward (part of that phase's transient)
    P_sum: int  # sum(param_bytes)
    O_sum: int  # sum(opt_bytes)
    # the state a flat ZeRO optimizer keeps for the stage's parameters the step gives no gradient (plain
    # training keeps none: an encoder's unread pooler): ZeRO-2/3 step every parameter of their flat slices
    O_gradless: int
    first: bool
    last: bool
    # per local phase, a swapped node's transient under the CPU executor's swap (traced: its saved
    # tensors leave as saved and come back one by one as asked for); None: not traced (the CPU
    # model then takes the bytes the node made out of its forward's transient)
    swap_trans: list | None = None
    # per local node, its forward / backward time when swapped on the CPU, measured with the copies
    # inline (None: not measured; the CPU model then adds the copies at the host link's rate)
    swap_fwd_time: list | None = None
    swap_bwd_time: list | None = None
    # per local node under ``selective``: the bytes its forward leaves held for its backward (traced;
    # untraced: its kept saved bytes), its traced backward transient (-1: untraced), its replay's time
    # (untraced: its whole forward's)
    sel_saved: list = ()
    sel_btrans: list = ()
    # ... what that transient counts of a storage this stage receives smaller (Buffer.sel_free_gap; empty: none)
    sel_bdrop: list = ()
    sel_ftrans: list = ()  # ... its forward's transient under the policy (untraced: its kept forward's)
    sel_ftraced: list = ()  # ... whether that is traced
    # per local node: the bytes of its output groups its selective policy holds to its backward (g_selheld):
    # every one where sel_held_out_bytes is all its outputs' bytes; else the one set of groups of exactly
    # those bytes, where one is (of up to four); else 0. They are the storages the layout carries as its
    # outputs: a selective x extends their lives to B_x instead of carrying them twice (DenseNet's stem, a
    # convolution, held its output beside features.0's checkpoint holding it; a few-shot encoder's first
    # convolution, whose node also makes a QR projection the policy replays: 1.25 MiB counted twice, 20% over)
    sel_held: list = ()
    # per local node: the bytes of its outputs its selective policy holds (sel_held_out_bytes), some or all
    sel_held_some: list = ()
    # per local node x of a later stage: the bytes of received values freed in B_x whose maker (a node of an
    # earlier stage) has a selective policy that may hold them (sel_held_out_bytes): the all-selective trace
    # carried them through B_x, so x's traced selective backward lacks them (fspool's sorted features' mix,
    # first on its stage: 48 KiB, its input, under)
    sel_recv: list = ()
    # per local node x of a later stage: the bytes of received values its checkpoint alone held in the
    # all-selective trace (x their first reader that saves tensors, their maker's policy unable to hold them)
    # that die in B_x here where the plain trace frees them elsewhere (extra: carried through B_x, in no kept
    # transient), and are in x's traced selective backward too (it freed them there); that backward's
    # figure with its inputs held (sel_hbtrans) bounds the two (a CNN cut before its selective second block,
    # the earlier block's ReLU output saved by that ReLU: 256 KiB counted twice, 15% over at B_x)
    sel_recv_ck: list = ()
    sel_time: list = ()
    # per local node: what its backward's peak adds where the saved tensors it frees are held to its end
    # (a swapped node whose copies to the host are still running on a GPU: held_bwd_transient_bytes over
    # bwd_transient_bytes; 0 where untraced; empty where none adds anything)
    held_extra: list = ()
    # per local node: what its backward's peak adds where what it frees of its inputs is held to its end (the
    # node recomputed: its checkpoint holds every input its forward read until its backward is through;
    # rec_held_bwd_transient_bytes over bwd_transient_bytes; 0 where untraced; empty where none adds anything)
    rec_held_extra: list = ()
    # per local node: its forward's transient had what it frees of earlier phases' buffers been held to its
    # end (Node.held_fwd_transient_bytes; -1: not traced)
    held_ftrans: list = ()
    # per local node, swapped as the CPU executor swaps (traced; empty where not): what its forward's transient
    # adds had what it frees of earlier buffers been held to its end (Node.cpu_swap_held_fwd_transient_bytes
    # over cpu_swap_fwd_transient_bytes), and the bytes of those it frees (cpu_swap_fwd_freed_bytes)
    swap_hfdelta: list = ()
    swap_ffreed: list = ()
    # per local node: its traced selective backward's transient had what it frees of its inputs been held to
    # its end (Node.sel_held_bwd_transient_bytes; empty where none is traced)
    sel_hbtrans: list = ()
    # per local node: what its traced selective backward's transient counts of the gradients it makes that a
    # later micro-batch's finds made already (Node.sel_bwd_transient_bytes less sel_steady_bwd_transient_bytes;
    # empty where not traced): its peak may fall before some of them are made, where the kept one's is past them
    sel_scut: list = ()
    # local nodes no backward runs through (TaskGraph.meta no_backward: the loss reads nothing they make):
    # recomputed, nothing is replayed in their backward phase
    dead: tuple = ()
    # per batch input the executor lets go before the stage's last backward phase: (bytes, the local phase
    # it is held through with every node kept, its local readers) (TaskGraph.input_deaths)
    input_deaths: tuple = ()
    # ... per entry, whether it is let go before its phase's peak (TaskGraph.early_deaths): out of that phase's
    # carried bytes too, where its readers are kept (a checkpointed reader's replay, a swapped one's, runs with it)
    input_early: tuple = ()
    # ... and whether the CPU executor's swap lets it go so too (TaskGraph.early_swapped_deaths): a swapped reader's
    # phase, priced from the all-swapped trace, is counted without it as a kept one's is
    input_early_swap: tuple = ()
    # per local node: of its backward's transient, the gradients it makes that a later micro-batch's
    # backward finds there already (counted in the step buffers then; the new one is added into it)
    bcut: list = ()
    # ... the same for the node swapped as the CPU executor swaps (empty: none, or untraced)
    swap_bcut: list = ()
    # ... both under ZeRO-3: of those gradients, the ones of weights more than one node reads, held whole and added
    # into (a unit's is made anew each micro-batch; Node.z3_steady_bwd_transient_bytes; empty: untraced)
    z3_bcut: list = ()
    z3_swap_bcut: list = ()
    # per local phase: the bytes of the parameter gradients first made there on this stage whose traced maker
    # is a node of a later stage (a tied weight), at most what holding them raises the phase's traced peak:
    # the trace's backward here added its new gradient into one already made and let it go; here it is the
    # gradient, held through the rest of the phase (a GRU seq2seq's tied embedding, its second call last on
    # the first stage: 15 KiB, 1.2% under)
    grad_first: list = ()
    # per local phase: what its kept transient was lowered by for a received value its node reads last there and
    # lets go with its saved tensors, before the phase's later peak (Buffer.read_gaps), that the node under another
    # action does not (a recomputed node's checkpoint holds it through its replay: added back; 8% under without)
    rdrop: list = ()
    # ... and per local node its bcut from that figure (empty: as bcut)
    rbcut: list = ()


def _first_grads(made: list, nodes) -> list:
    """:attr:`StageLayout.grad_first`: per local phase, the gradient bytes first made there whose traced maker
    is on a later stage, at most what holding them raised that backward's traced peak
    (Node.first_bwd_transient_bytes; untraced: their bytes)."""
    m = len(nodes)
    out = list(made)
    for p in range(m, 2 * m):
        nd = nodes[2 * m - 1 - p]
        if out[p] and nd.first_bwd_transient_bytes >= 0:
            out[p] = min(out[p], max(0, int(nd.first_bwd_transient_bytes) - int(nd.bwd_transient_bytes)))
    return out if any(out) else ()


def _held_of(outs: list, size, held: int, total: int):
    """Which of a node's outputs ``outs`` (``size(o)``: bytes) its selective policy holds, the profile saying
    ``held`` bytes of them, ``total`` all: all where those are all; else the one set (of up to four, among up to
    twelve) of exactly those bytes; None where there is no one such set."""
    if held == total:  # (the profile's held outputs are all of them: the same storages' bytes)
        return list(outs)
    fits = [c for r in range(1, min(len(outs), 4) + 1) for c in combinations(outs, r)
            if sum(size(o) for o in c) == held] if len(outs) <= 12 else []
    return list(fits[0]) if len(fits) == 1 else None


def _maker_holds(graph: TaskGraph, k: int) -> set | None:
    """The buffers (their ids) among node ``k``'s outputs (made in its forward, read by a later node's forward)
    that its selective policy holds to its backward (:func:`_held_of`, as :func:`_policy_held` tells a stage's
    own nodes'); None where that does not tell."""
    held = int(graph.nodes[k].sel_held_out_bytes)
    if held <= 0:
        return set()
    n = graph.n
    graph = getattr(graph, "whole", graph)  # (a stage's view of the graph has only the buffers it touches)
    outs = [b for b in graph.buffers if b.alloc_phase == k and b.kind != KIND_GRAD and any(k < u < n for u in b.uses)]
    chosen = _held_of(outs, lambda b: b.nbytes, held, sum(b.nbytes for b in outs))
    return None if chosen is None else {id(b) for b in chosen}


def _policy_held(keys: list, groups: dict, out_bytes: list, nodes) -> tuple:
    """(per local node the bytes of its outputs its selective policy holds, per group whether it is one of
    them): :attr:`StageLayout.sel_held`, :attr:`StageLayout.g_selheld`."""
    sel_held = [0] * len(nodes)
    g_selheld = [False] * len(keys)
    mine = defaultdict(list)  # per local node, its output groups
    for i, k in enumerate(keys):
        if k[12] and k[0] >= 0:
            mine[k[0]].append(i)
    for x, nd in enumerate(nodes):
        held = int(nd.sel_held_out_bytes)
        if held <= 0:
            continue
        chosen = _held_of(mine[x], lambda i: groups[keys[i]], held, out_bytes[x])
        if chosen is None:
            continue
        for i in chosen:
            g_selheld[i] = True
        sel_held[x] = held
    return sel_held, g_selheld


def _loc(p: int, n: int, a: int, b: int, m: int):
    """Local index of global phase p on stage [a, b), or None if not local."""
    if p < n:
        return p - a if a <= p < b else None
    if p < 2 * n:
        k = 2 * n - 1 - p
        return m + (b - 1 - k) if a <= k < b else None
    return 2 * m if p == 2 * n else 2 * m + 1


def _swapped_by(la: int, lf: int, uses: list, fusers: tuple, m: int, held: int) -> tuple:
    """``(x, hold, holders)`` for a forward-made buffer that local node x's backward frees (phase
    ``lf``): x saved it if x made it or its forward read it, so x's swap moves it to host (the pack
    hook copies every tensor x saves). ``hold``: the last local phase its device copy is held
    anyway — its forward uses, and at least ``held``; ``holders``: ``(y, B_y)`` for each later node
    y whose backward reads it too (y saved it): unless y is swapped as well, y holds the device copy
    until B_y. ``(-1, 0, ())``: no swap moves it."""
    if not m <= lf < 2 * m:
        return -1, 0, ()
    x = 2 * m - 1 - lf
    if la != x and x not in fusers:
        return -1, 0, ()
    hold = max([la, held] + [u for u in uses if u < m])
    holders = tuple(sorted({(2 * m - 1 - u, u) for u in uses if m <= u < 2 * m and u != lf}))
    return x, hold, holders


def param_kind(graph, name: str) -> int:
    """The dtype kind of parameter ``name`` of ``graph``'s table (its fifth field, :func:`memflow.buckets.dtype_kind`;
    0 where a hand-made table has none)."""
    v = graph.params[name]
    return int(v[4]) if len(v) > 4 else 0


def _largest_with_state(graph) -> tuple[int, int]:
    """``(bytes, state bytes)`` of ``graph``'s largest parameter with optimizer state, ``(0, 0)`` without one:
    the one whose state per byte is the optimizer's rate (a one-element bias's 12 bytes of AdamW state
    over its 4 is 3 per byte: its step count, read as a rate, priced a ZeRO-2 slice 50% above its state)."""
    return max(((int(v[0]), int(v[2])) for v in graph.params.values() if int(v[0]) and int(v[2])), default=(0, 0))


def state_rate(graph) -> int:
    """The optimizer state bytes per parameter byte of ``graph``'s parameters with state (AdamW's 2,
    momentum SGD's 1; 0: none): what a sharded step gives a gradless parameter, which plain training's
    traced step gave none."""
    pb, ob = _largest_with_state(graph)
    return ob // pb if pb else 0


def state_counter(graph) -> int:
    """The optimizer state bytes per parameter above :func:`state_rate`'s share (AdamW's step count, 4;
    0: none): a sharded step keeps one per flat slice it steps."""
    pb, ob = _largest_with_state(graph)
    return ob - (ob // pb) * pb if pb else 0


def _gradless_state(graph, nodes, gradless: set) -> int:
    """Optimizer state bytes for ``nodes``' own parameters of ``gradless``, at :func:`state_rate`, with
    :func:`state_counter`'s per-parameter part."""
    if not gradless or not graph.params:
        return 0
    rate, counter = state_rate(graph), state_counter(graph)
    return sum(rate * int(graph.params[k][0]) + counter for nd in nodes for k in nd.param_names if k in gradless)


def _held_deaths(graph: TaskGraph, a: int, b: int) -> tuple:
    """:meth:`TaskGraph.input_deaths` of the stage, each input's readers only those whose forward saves some
    tensor: a checkpointed reader that saves none holds nothing, its inputs included (PatchTST's scaler, all of
    whose ops are on values that need no gradient: its batch input held to its backward, 768 bytes of a
    12 KiB stage over, 10%)."""
    return tuple((nb, d, tuple(x for x in readers if graph.nodes[a + x].saved_tensors != 0))
                 for nb, d, readers in graph.input_deaths(a, b))


def build_layout(graph: TaskGraph, a: int, b: int) -> StageLayout:
    n = graph.n
    m = b - a
    groups: dict[tuple, int] = {}
    rgaps: dict[tuple, dict] = {}  # per group, its buffers' least Buffer.read_gaps by local phase (g_rgap)
    srgaps: dict[tuple, dict] = {}  # ... and their least Buffer.steady_read_gaps (g_srgap)
    # per local node: the bytes its swap copies to the host, and of them the storages it made
    x_bytes, x_made = [0] * m, [0] * m

    def add(nb, la, lf, extra, step, grad, late, fusers, saver=(-1, 0, ()), cached=False, out=False, buf=None,
            unpacked=False, solo=False):
        # (a storage under MIN_SWAP_BYTES: the pack hook leaves it on the device; its saver's recompute
        # still drops it)
        noswap = saver[0] >= 0 and nb < MIN_SWAP_BYTES
        key = (la, lf, extra, step, grad, late, saver[0], fusers, saver[1], saver[2], cached and saver[0] == la,
               noswap, out, unpacked)
        # of a storage its one saver reads only views of in its backward, a swap copies those views and brings
        # back only them: the rest leaves the device with the copy out and stays off it (GPT-NeoX's fused q/k/v
        # projection, of which attention saves v alone: two thirds of it counted back, 2.8% over)
        back = min(nb, buf.read_bytes((2 * n - 1 - a - saver[0],)) or nb) \
            if buf is not None and saver[0] >= 0 and not saver[2] and not noswap else nb
        mine, smine = {}, {}
        for p, g in (buf.read_gaps if buf is not None else ()):
            q = _loc(p, n, a, b, m)
            if q is not None and m <= q < 2 * m:
                mine[q] = int(g)
        for p, g in (buf.steady_read_gaps if buf is not None else ()):
            q = _loc(p, n, a, b, m)
            if q is not None and m <= q < 2 * m:
                smine[q] = int(g)
        for k in (key + (False, solo),) + ((key + (True, solo),) if back < nb else ()):
            rgaps[k] = mine if k not in rgaps else {q: min(g, mine[q]) for q, g in rgaps[k].items() if q in mine}
            srgaps[k] = smine if k not in srgaps else {q: min(g, smine[q]) for q, g in srgaps[k].items()
                                                       if q in smine}
        groups[key + (False, solo)] = groups.get(key + (False, solo), 0) + back
        if back < nb:
            groups[key + (True, solo)] = groups.get(key + (True, solo), 0) + nb - back
        if saver[0] < 0 or noswap:
            return
        # each swapping node's pack hook copies what it saved: the views its backward reads where it reads
        # no more (a GRU step saves two of its gates' three chunks), the storage whole otherwise; the device
        # storage dies either way. A later node whose backward reads it saved it too: its hook copies it again
        for z in (saver[0], *(y for y, _u in saver[2])):
            x_bytes[z] += min(nb, buf.read_bytes((2 * n - 1 - a - z,)) or nb) if buf is not None else nb
        if la == saver[0]:
            x_made[saver[0]] += nb

    # a parameter read by nodes of several stages (tied weights) has a replica, with its own
    # gradient and optimizer state, on every stage that reads it (the executor sums their grads)
    readers: dict[str, list[int]] = {}
    for nd in graph.nodes:
        for name in nd.read_params:
            readers.setdefault(name, []).append(nd.index)
    # (one read through a view another node handed on arrives on a later stage as values: a received copy
    # and its gradient, counted as a replica, its state too: over, where they were not counted at all,
    # 18% under on a WGAN critic cut after the node that clips its weights)
    holders = {k: list(v) for k, v in readers.items()}
    for nd in graph.nodes:
        for name in nd.handed_params:
            if nd.index not in holders.setdefault(name, []):
                holders[name].append(nd.index)
    replica_p = [0] * m
    replica_o = [0] * m
    for name, (pb, _gb, ob, owner, *_) in graph.params.items():
        local = [k for k in holders.get(name, []) if a <= k < b]
        if local and not a <= owner < b:
            replica_p[local[0] - a] += pb
            replica_o[local[0] - a] += ob

    sent_fwd = 0  # bytes this stage sends forward per micro-batch
    recv_bwd = 0  # ... and receives back as gradients (of those, and of what it relays), as its backward starts
    # what this stage's forward sends copy (memflow.graph.sending: a view of part of a storage travels as a
    # contiguous copy), and the storages only such copies send on: held to the F half's end, not by the send
    fcopy = copy_held = 0
    # per local node x, the bytes the layout counts in F_x as extra (x's forward is their last local use, no
    # node here saves them) that the CPU's all-swapped trace frees inside F_x: in its traced transient already
    swap_fdied = [0] * m

    def fdied(buf, nb, lf, extra, saver):
        # (every node's pack hook moved its copy to the host: the device copy dies with its last forward use)
        if (extra and 0 <= lf < m and saver[0] < 0 and buf.packed and nb >= MIN_SWAP_BYTES
                and buf.free_phase > a + lf == max((u for u in buf.uses if u < n), default=-1)):
            swap_fdied[lf] += nb
    out_bytes = [0] * m  # per local node: its outputs' bytes (what later forwards read of what it made)
    sel_recv = [0] * m
    maker_held: dict = {}  # per node of an earlier stage, the outputs its selective policy holds (_maker_holds)
    sel_recv_ck = [0] * m
    grad_first = [0] * (2 * m)
    tdrop = [0] * (2 * m)  # per phase, what its traced transient counts of storages received smaller
    rdrop = [0] * (2 * m)  # ... and of received values its kept node lets go before the phase's later peak
    sdrop = [0] * (2 * m)  # ... and its all-swapped traced one
    seldrop = [0] * m  # ... and per local node, its selective backward's
    no_backward = set(graph.meta.get("no_backward", ()))
    for buf in graph.buffers:
        nb = int(buf.nbytes)
        if nb <= 0:
            continue
        pa, pf = buf.alloc_phase, buf.free_phase
        if buf.kind == KIND_GRAD and buf.param in readers:
            # a gradient lives on every stage holding its parameter, from that stage's first
            # backward reading it until the step's end
            local = [k for k in readers[buf.param] if a <= k < b]
            if local and pa < 2 * n:
                la = _loc(2 * n - 1 - max(local), n, a, b, m)
                lf = _loc(pf, n, a, b, m) if pf >= 2 * n else 2 * m
                add(nb, la, lf, False, True, True, False, ())
                if pa != 2 * n - 1 - max(local):
                    grad_first[la] += nb
            continue
        if pa >= 2 * n:  # made in the optimizer phase: never carried within the step
            continue
        fwd_alloc = pa < n
        owner = pa if fwd_alloc else 2 * n - 1 - pa
        copy_only = False
        if buf.copies:  # values on it this stage sends on, of which its sends copy some
            crossing = [c for c in buf.copies if a <= c[0] < b <= c[1]]
            fcopy += sum(c[2] for c in crossing)
            copy_only = bool(crossing) and all(c[2] for c in crossing)
        use_nodes_local, use_remote_after, use_remote_before = [], False, False
        fusers = []
        for u in buf.uses:
            if u >= 2 * n:
                continue
            k = u if u < n else 2 * n - 1 - u
            if a <= k < b:
                use_nodes_local.append(_loc(u, n, a, b, m))
                # (a node's own temporaries are not its inputs; a node that saves no tensor neither
                # holds nor swaps its inputs, recomputed or swapped: nothing of it outlives its forward;
                # measured, nor does one no backward runs through: LayoutLM's unread pooler, recomputed, was
                # priced holding the received encoder output to its backward phase, which the run's did not,
                # and counted it beside the classifier's traced backward, which has it: 5 KiB, 25% over; CANINE's
                # unread upsampling, tests/test_dead_branch.py, stays within its 1%)
                if (u < n and not (fwd_alloc and k == owner) and graph.nodes[k].saved_tensors != 0
                        and k not in no_backward):
                    fusers.append(k - a)
            elif k >= b:
                use_remote_after = True
            else:
                use_remote_before = True
        if pf < 2 * n:  # the freeing phase counts as a use
            kf = pf if pf < n else 2 * n - 1 - pf
            if kf >= b:
                use_remote_after = True
            elif kf < a:
                use_remote_before = True
        fusers_t = tuple(sorted(set(fusers)))
        lf_native = _loc(pf, n, a, b, m) if pf >= 2 * n or (a <= (pf if pf < n else 2 * n - 1 - pf) < b) else None
        grad = buf.kind == KIND_GRAD
        if a <= owner < b:
            la = _loc(pa, n, a, b, m)
            sends = use_remote_after or use_remote_before
            if lf_native is not None:
                lf, extra = lf_native, False
            else:
                need = max([la] + use_nodes_local)
                if fwd_alloc and use_remote_after and need <= m - 1 and not copy_only:
                    lf, extra = m, False  # sent forward: held until its gradients come back
                    sent_fwd += nb
                else:
                    if sends:
                        need = max(need, m - 1 if fwd_alloc else 2 * m - 1)
                    lf, extra = need, need > la
                    if copy_only:  # sent as copies: held until the send, then the copies are
                        copy_held += nb
            step = grad or lf >= 2 * m
            saver = (-1, 0, ())
            freed_here = fwd_alloc and not step and lf_native is not None
            if freed_here and buf.packed:  # (not packed: held by the graph itself, no action moves it)
                # sent forward: held until its gradients return
                # (sent only as copies: held until the send, as the F half ends)
                held = (m - 1 if copy_only else m) if use_remote_after else (lf if use_remote_before else la)
                saver = _swapped_by(la, lf, use_nodes_local, fusers_t, m, held)
            # (an output of its maker, which later forwards read: a selective maker's policy may hold it)
            out = fwd_alloc and not step and any(pa < u < n for u in buf.uses)
            if out:
                out_bytes[la] += nb
            add(nb, la, lf, extra, step, grad, False, fusers_t, saver, bool(buf.cast) and fwd_alloc, out, buf,
                unpacked=freed_here and not buf.packed)
            if fwd_alloc and not step:
                fdied(buf, nb, lf, extra, saver)
            continue
        # not owned here: received, relayed, or absent. A stage receives what its nodes (and the
        # stages it relays to) read of the storage, as tensors of their own: a view alone
        if fwd_alloc:
            nb = buf.read_bytes(u for u in buf.uses if u < 2 * n and (u if u < n else 2 * n - 1 - u) >= a) or nb
        else:
            nb = buf.read_bytes(u for u in buf.uses if u < 2 * n and (u if u < n else 2 * n - 1 - u) < b) or nb
        if fwd_alloc and owner < a:
            relay = use_remote_after
            if not use_nodes_local and not relay:
                continue
            la, late = -1, False
            need = max([la] + use_nodes_local)
            if relay and need <= m - 1 and not copy_only:
                add(nb, la, m, False, False, grad, False, fusers_t)  # relayed: held like a sent value
                sent_fwd += nb
                continue
            if copy_only:
                copy_held += nb
        elif (not fwd_alloc) and owner >= b:
            relay = use_remote_before
            if not use_nodes_local and not relay:
                continue
            la, late = m - 1, True
            need = max([la] + use_nodes_local)
            if relay:
                need = max(need, 2 * m - 1)
            recv_bwd += nb
        else:  # odd direction (e.g. a forward buffer read by an earlier stage's backward)
            if not use_nodes_local:
                continue
            la, late, relay = m - 1, True, False
            need = max([la] + use_nodes_local)
        saver = (-1, 0, ())
        if lf_native is not None and lf_native >= need and lf_native < 2 * m:
            lf, extra = lf_native, False
            if not late:  # received (relayed: sent on, held until its gradients return)
                saver = _swapped_by(la, lf, use_nodes_local, fusers_t, m, m if relay else la)
        else:
            lf, extra = need, need > la
            if not late and m <= need < 2 * m:
                # received, its maker's stage frees its own copy: here it dies with its last local reader,
                # a node that saved it (the executor keeps only gradient edges of what it received), so
                # that node's swap moves it (an LSTM stage's received input: 4 KiB per micro-batch in
                # flight held in the plan, gone in the run)
                saver = _swapped_by(la, need, use_nodes_local, fusers_t, m, m if relay else la)
        # (received, read before this stage by its maker alone, whose selective policy is
        # known not to hold it: with every node selective nothing but this stage's readers held it: solo)
        solo = (fwd_alloc and owner < a and not relay and lf_native is not None
                and all(u == pa or u >= a for u in buf.uses if u < n))
        if solo:
            if owner not in maker_held:
                maker_held[owner] = _maker_holds(graph, owner)
            solo = maker_held[owner] is not None and id(buf) not in maker_held[owner]
        add(nb, la, lf, extra, False, grad, late, fusers_t, saver, buf=buf, solo=solo)
        if not (extra or relay) and lf == lf_native and 0 < nb < int(buf.nbytes) and buf.free_gap > 0:
            # received smaller than the storage the trace freed at its phase's peak: that peak less the
            # difference, at most down to the peak after its free (Buffer.free_gap; a 1-D U-Net's skip
            # gradients, a slice of each decoder concatenation's, 6-8% over at the encoder's backward)
            tdrop[lf] = max(tdrop[lf], min(int(buf.nbytes) - nb, int(buf.free_gap)))
        if not (extra or relay) and lf == lf_native and 0 < nb < int(buf.nbytes) and buf.swap_free_gap > 0:
            sdrop[lf] = max(sdrop[lf], min(int(buf.nbytes) - nb, int(buf.swap_free_gap)))  # (the same, swapped)
        if (not (extra or relay) and lf == lf_native and m <= lf < 2 * m and 0 < nb < int(buf.nbytes)
                and buf.sel_free_gap > 0):  # (the same, selective: a 3-D U-Net's selective encoder, 12-14% over)
            x = 2 * m - 1 - lf
            seldrop[x] = max(seldrop[x], min(int(buf.nbytes) - nb, int(buf.sel_free_gap)))
        if extra and fwd_alloc and not (late or relay) and m <= lf < 2 * m and lf in use_nodes_local and buf.read_gaps:
            # received, read last here by a backward whose trace held it on (an earlier stage's node reads it
            # later): let go with that node's saved tensors, before the phase's later peak (Buffer.read_gaps; a
            # feature pyramid's head applied to a received scale: 4 KiB, 5% over at that backward)
            gp = 2 * n - 1 - (a + 2 * m - 1 - lf)
            gap = next((g for p, g in buf.read_gaps if p == gp), 0)
            rdrop[lf] = max(rdrop[lf], min(nb, int(gap)))
        if fwd_alloc and not late:
            fdied(buf, nb, lf, extra, saver)
            held_by = int(graph.nodes[owner].sel_held_out_bytes) if owner < a else 0
            if not extra and m <= lf < 2 * m and 0 < int(buf.nbytes) <= held_by:
                # (where the maker's outputs tell which it holds, only those: a feature pyramid's sum of scales,
                # made beside a convolution whose output the policy holds, 16 KiB, 11%, over at its reader's
                # backward)
                if owner not in maker_held:
                    maker_held[owner] = _maker_holds(graph, owner)
                if maker_held[owner] is None or id(buf) in maker_held[owner]:
                    sel_recv[2 * m - 1 - lf] += nb
            # (read here only by forwards that do not save it, the first of them x: a checkpointed x holds it to
            # B_x, where the all-selective trace freed it too; a 1-D U-Net's skip, received for its last decoder
            # level's concatenation, selective: 256 KiB counted twice, 6% over)
            x = 2 * m - 1 - lf if lf >= m else (fusers_t[0] if fusers_t else -1)
            if (extra and 0 <= x <= lf < 2 * m and not relay and fusers_t and fusers_t[0] == x and int(buf.nbytes) > held_by
                    and min(u for u in buf.uses if owner < u < n and graph.nodes[u].saved_tensors != 0) == a + x):
                sel_recv_ck[x] += nb

    # what this stage's sends copy (memflow.graph.sending: a view of part of a storage travels as a
    # contiguous copy). A forward send's is made as the F half ends and dropped as the micro-batch's
    # backward starts (held while it waits in flight); a gradient send's is made as the B half ends and
    # dropped as the next pass starts. Both beside all that is alive then, in no traced phase (a slice of
    # a stage's last output: 64 KiB per micro-batch in flight, 8% of the stage, above its plan)
    bcopy = sum(nb for c, nb in graph.bwd_send_copies if c == a) if a > 0 else 0
    # (a view of a batch input sent as a copy: a language model's targets sliced by its first node and read
    # by its loss; the batch is no buffer of the graph's: 512 B per micro-batch in flight under on a MoE)
    fcopy += sum(nb for j, r, nb in graph.fwd_input_send_copies if a <= j < b <= r)
    if fcopy:
        add(fcopy, m - 1, m, False, False, False, False, ())
    trans = [0] * (2 * m + 1)
    nodes = graph.nodes[a:b]
    for x, nd in enumerate(nodes):
        trans[x] = int(nd.fwd_transient_bytes)
        trans[2 * m - 1 - x] = int(nd.bwd_transient_bytes)
    # (a read gap is the kept node's: recomputed or swapped, the phase's node holds the value, ``held``; the most
    # either rule takes off a phase, two storages could be counted off one peak)
    held = list(trans)
    for p, v in enumerate(tdrop):
        held[p] = max(0, trans[p] - v)
        trans[p] = max(0, trans[p] - max(v, rdrop[p]))
    # a micro-batch's sent values are released as its backward starts, before its gradients are received
    # (memflow.executor.stage: release_oldest_forward, then recv_grads): alive then with all else the phase
    # starts with but the received gradients, not made yet: every node kept, what dies in the phase less those
    # gradients. Any other action holds no more of that (a swapped or recomputed last node's saved tensors are
    # off the device), so that bounds the sent values' own figure (counted beside the gradients, a multi-scale
    # encoder's stage whose running sum is sent and read by no backward of its own was 18.9% over there)
    at_release = min(sent_fwd, sum(v for k, v in groups.items() if k[1] == m and k[0] < m and not (k[2] or k[3]))
                     - recv_bwd) if sent_fwd else 0
    trans[m] = max(trans[m], at_release)
    held[m] = max(held[m], at_release)
    at_send = {}  # per phase, what its start (m) or end (2m-1) holds beside the carried bytes, with the copies
    if fcopy:  # as the F half ends: what dies in B_{m-1} unless carried through it (the copy among them)
        # and the storages the copies were made of
        at_send[m] = copy_held + sum(v for k, v in groups.items() if k[1] == m and k[0] < m and not (k[2] or k[3]))
    if bcopy:  # as the B half ends: what B_{a}'s backward made and leaves alive, and the copies, and what the
        # stage received that dies there: the executor holds it until its gradient is sent (a U-Net's middle
        # block's input, first on its stage: 12,800 B under at the send, one micro-batch waiting in flight)
        at_send[2 * m - 1] = bcopy + sum(v for k, v in groups.items() if (k[0] == 2 * m - 1 and k[1] > 2 * m - 1)
                                         or (k[0] == -1 and k[1] == 2 * m - 1 and not k[5]))
    for p, v in at_send.items():
        trans[p] = max(trans[p], v)
        held[p] = max(held[p], v)
    rdrop = [held[p] - trans[p] for p in range(2 * m)]
    # ... and where the stage's last node is swapped (what swap_trans[m] prices): what it alone saved went to the
    # host in its forward, before the send (a GIT vision layer last on its stage: 78 KiB, 10%, over)
    at_send_swap = dict(at_send)
    if fcopy:
        at_send_swap[m] = copy_held + sum(v for k, v in groups.items() if k[1] == m and k[0] < m
                                          and not (k[2] or k[3]) and not (k[6] == m - 1 and not k[9] and not k[11]))
    # per local node, what its backward's transient counts of the gradients it makes that a later
    # micro-batch's finds made already (traced: Node.steady_bwd_transient_bytes; the stage's step buffers)
    def cuts(tr, steady, whole, send):
        out = [0] * m
        for x, nd in enumerate(nodes):
            v = getattr(nd, steady)
            if 0 <= v < getattr(nd, whole):
                p = 2 * m - 1 - x
                out[x] = max(0, tr[p] - max(int(v), at_release if p == m else 0, send.get(p, 0)))
        return out

    bcut = cuts(trans, "steady_bwd_transient_bytes", "bwd_transient_bytes", at_send)
    # (a recomputed or selective node's, from its figure with the received value held: rdrop)
    rbcut = cuts(held, "steady_bwd_transient_bytes", "bwd_transient_bytes", at_send) if any(rdrop) else ()
    z3_bcut = (cuts(trans, "z3_steady_bwd_transient_bytes", "bwd_transient_bytes", at_send)
               if all(nd.z3_steady_bwd_transient_bytes >= 0 for nd in nodes) else ())
    swap_trans = None
    if all(nd.cpu_swap_fwd_transient_bytes >= 0 and nd.cpu_swap_bwd_transient_bytes >= 0 for nd in nodes):
        swap_trans = list(trans)
        for x, nd in enumerate(nodes):
            swap_trans[x] = int(nd.cpu_swap_fwd_transient_bytes)
            swap_trans[2 * m - 1 - x] = int(nd.cpu_swap_bwd_transient_bytes)
        swap_trans[m] = max(swap_trans[m], at_release)
        for x in range(m):  # (a stage of one swapped linear head: its received input counted twice, 89% over)
            swap_trans[x] -= swap_fdied[x]
        for p, v in enumerate(sdrop):
            swap_trans[p] = max(0, swap_trans[p] - v)
        for p, v in at_send_swap.items():
            swap_trans[p] = max(swap_trans[p], v)
    swap_hfdelta = swap_ffreed = ()
    if swap_trans is not None and all(nd.cpu_swap_held_fwd_transient_bytes >= 0 and nd.cpu_swap_fwd_freed_bytes >= 0
                                      for nd in nodes):
        swap_hfdelta = [int(nd.cpu_swap_held_fwd_transient_bytes - nd.cpu_swap_fwd_transient_bytes) for nd in nodes]
        swap_ffreed = [int(nd.cpu_swap_fwd_freed_bytes) for nd in nodes]
    # ... and swapped as the CPU executor swaps (traced: Node.cpu_swap_steady_bwd_transient_bytes)
    swap_bcut = z3_swap_bcut = [0] * m
    if swap_trans is not None:
        swap_bcut = cuts(swap_trans, "cpu_swap_steady_bwd_transient_bytes", "cpu_swap_bwd_transient_bytes", at_send_swap)
        z3_swap_bcut = (cuts(swap_trans, "cpu_swap_z3_steady_bwd_transient_bytes", "cpu_swap_bwd_transient_bytes",
                             at_send_swap) if all(nd.cpu_swap_z3_steady_bwd_transient_bytes >= 0 for nd in nodes) else ())
    dp_grads, ddp_grads, dp_kinds, ddp_kinds = [], [], [], []
    gradless = set(graph.meta.get("gradless_params", ()))  # (no gradient: the all-reduce's buckets leave them out)
    for nd in nodes:
        if graph.params:
            gb = graph.params
            ks = [k for k in nd.param_names if k in gb and gb[k][1] > 0 and all(a <= r < b for r in readers.get(k, ()))]
            dp_grads.append(tuple(int(gb[k][1]) for k in ks))
            ddp_grads.append(tuple(int(gb[k][1]) for k in ks if k not in gradless))
            dp_kinds.append(tuple(param_kind(graph, k) for k in ks))
            ddp_kinds.append(tuple(param_kind(graph, k) for k in ks if k not in gradless))
        else:  # no parameter table (synthetic graphs): the node's gradients as one
            dp_grads.append((int(nd.grad_bytes),) if nd.grad_bytes > 0 else ())
            ddp_grads.append(dp_grads[-1])
            dp_kinds.append((0,) * len(dp_grads[-1]))
            ddp_kinds.append(dp_kinds[-1])
    keys = list(groups)
    sel_held, g_selheld = _policy_held(keys, groups, out_bytes, nodes)
    swap_fwd = swap_bwd = None
    if all(nd.cpu_swap_fwd_time_s >= 0 and nd.cpu_swap_bwd_time_s >= 0 for nd in nodes):
        swap_fwd = [float(nd.cpu_swap_fwd_time_s) for nd in nodes]
        swap_bwd = [float(nd.cpu_swap_bwd_time_s) for nd in nodes]
    held_extra = [max(0, int(nd.held_bwd_transient_bytes) - int(nd.bwd_transient_bytes))
                  if nd.held_bwd_transient_bytes >= 0 else 0 for nd in nodes]
    rec_held_extra = [max(0, int(nd.rec_held_bwd_transient_bytes) - int(nd.bwd_transient_bytes))
                      if nd.rec_held_bwd_transient_bytes >= 0 else 0 for nd in nodes]
    return StageLayout(
        a=a, b=b, m=m, input_deaths=_held_deaths(graph, a, b), input_early=graph.early_deaths(a, b),
        input_early_swap=graph.early_swapped_deaths(a, b), bcut=bcut, swap_bcut=swap_bcut if any(swap_bcut) else (),
        z3_bcut=z3_bcut, z3_swap_bcut=z3_swap_bcut,
        grad_first=_first_grads(grad_first, nodes), rdrop=rdrop if any(rdrop) else (), rbcut=rbcut,
        g_bytes=[groups[k] for k in keys],
        g_alloc=[k[0] for k in keys],
        g_free=[k[1] for k in keys],
        g_extra=[k[2] for k in keys],
        g_step=[k[3] for k in keys],
        g_grad=[k[4] for k in keys],
        g_late=[k[5] for k in keys],
        g_xnode=[k[6] for k in keys],
        g_hold=[k[8] for k in keys],
        g_holders=[k[9] for k in keys],
        g_fusers=[k[7] for k in keys],
        g_cached=[k[10] for k in keys],
        g_noswap=[k[11] for k in keys],
        g_out=[k[12] for k in keys],
        g_selheld=g_selheld,
        g_unpacked=[k[13] for k in keys],
        g_noback=[k[14] for k in keys],
        g_solo=[k[15] for k in keys],
        g_rgap=[tuple(sorted(rgaps.get(k, {}).items())) for k in keys],
        g_srgap=[tuple(sorted(srgaps.get(k, {}).items())) for k in keys],
        trans=trans,
        fwd_time=[float(nd.fwd_time_s) for nd in nodes],
        bwd_time=[float(nd.bwd_time_s) for nd in nodes],
        fwd_trans=[int(nd.rec_fwd_transient_bytes if nd.rec_fwd_transient_bytes >= 0 else nd.fwd_transient_bytes)
                   for nd in nodes],
        ck_trans=[int(nd.ck_fwd_transient_bytes if nd.ck_fwd_transient_bytes >= 0 else nd.fwd_transient_bytes)
                  for nd in nodes],
        pre_replay=[max(0, int(nd.bwd_pre_replay_bytes)) for nd in nodes],
        param_bytes=[int(nd.param_bytes) + replica_p[x] for x, nd in enumerate(nodes)],
        grad_bytes=[int(nd.grad_bytes) for nd in nodes],
        opt_bytes=[int(nd.optimizer_bytes) + replica_o[x] for x, nd in enumerate(nodes)],
        dp_grads=dp_grads,
        ddp_grads=ddp_grads,
        dp_kinds=dp_kinds,
        ddp_kinds=ddp_kinds,
        x_bytes=x_bytes,
        x_made=x_made,
        P_sum=sum(int(nd.param_bytes) for nd in nodes) + sum(replica_p),
        O_sum=sum(int(nd.optimizer_bytes) for nd in nodes) + sum(replica_o),
        O_gradless=_gradless_state(graph, nodes, gradless),
        first=a == 0,
        last=b == graph.n,
        swap_trans=swap_trans, swap_hfdelta=swap_hfdelta, swap_ffreed=swap_ffreed,
        swap_fwd_time=swap_fwd, swap_bwd_time=swap_bwd,
        sel_saved=[int(nd.sel_saved_bytes if nd.sel_saved_bytes >= 0 else nd.saved_bytes) for nd in nodes],
        sel_btrans=[int(nd.sel_bwd_transient_bytes) for nd in nodes],
        sel_bdrop=seldrop if any(seldrop) else (),
        sel_ftrans=[int(nd.sel_fwd_transient_bytes if nd.sel_fwd_transient_bytes >= 0 else nd.fwd_transient_bytes)
                    for nd in nodes],
        sel_ftraced=[nd.sel_fwd_transient_bytes >= 0 for nd in nodes],
        sel_held=sel_held,
        sel_held_some=[int(nd.sel_held_out_bytes) for nd in nodes],
        sel_recv=sel_recv if any(sel_recv) else (),
        sel_recv_ck=sel_recv_ck if any(sel_recv_ck) else (),
        sel_time=[float(nd.sel_replay_time_s if nd.sel_replay_time_s >= 0 and nd.sel_saved_bytes >= 0
                        else nd.fwd_time_s) for nd in nodes],
        held_extra=held_extra if any(held_extra) else (),
        rec_held_extra=rec_held_extra if any(rec_held_extra) else (),
        held_ftrans=[int(nd.held_fwd_transient_bytes) for nd in nodes],
        sel_hbtrans=[int(nd.sel_held_bwd_transient_bytes) for nd in nodes]
        if any(nd.sel_held_bwd_transient_bytes >= 0 for nd in nodes) else (),
        sel_scut=[max(0, int(nd.sel_bwd_transient_bytes) - int(nd.sel_steady_bwd_transient_bytes)) for nd in nodes]
        if all(nd.sel_steady_bwd_transient_bytes >= 0 and nd.sel_bwd_transient_bytes >= 0 for nd in nodes) else (),
        dead=tuple(k - a for k in graph.meta.get("no_backward", ()) if a <= k < b),
    )
