"""Greedy repair: from a strategy that does not fit, the cheapest fixes one at a time.

The chains repair infeasible states at random (:data:`search.moves.REPAIRS`);
where the optimum lies behind a mesh or schedule change that first overflows
and then needs several fixes (a deeper pipeline at more micro-batches, with a
host optimizer on some stages and a recomputed node), a chain at low
temperature rarely walks that far. :func:`greedy_repair` walks it
deterministically: at each step it tries the fixes of :func:`search.fixes.fixes`
on every over-full stage — its optimizer on the host, its state sharded, one of
its ``TOP_NODES`` largest kept nodes recomputed or swapped (or a recomputed one
swapped, or the reverse), or all its kept nodes, a node moved towards any other
stage, 1F1B for GPipe, the next micro-batch count — and walks on by the one that
frees the most overflow per second it adds; the answer is the fastest fit met on
the way.
:func:`repair_descent` runs it from the most promising over-full neighbours of
the search's best, polishes a few neighbours that fit on other meshes, and
starts from the restart points when nothing fits.
"""
from __future__ import annotations

import time

from memflow.kinds import KEEP, SWAP
from memflow.strategy import Strategy

from . import fixes as fx
from .context import SearchContext
from .mcmc import fullest_overflow

__all__ = ["greedy_repair", "repair_descent", "overflow"]

TOP_NODES = 3  # the over-full stage's kept nodes with the most saved bytes tried per step
MAX_STEPS_PER_NODE = 2  # steps allowed: this × nodes (+ 8)
CANDIDATES = 6  # infeasible strategies repaired per round of the descent: on best's mesh, and on others
PER_MESH = 2  # of those, at most this many with one dp and micro-batch count
RECUTS = 2  # and on best's mesh, this many more that move nodes between its stages (past the CANDIDATES)
ESCAPES = 4  # strategies that fit on another mesh, slower than best, polished per round (at most PER_MESH a mesh)
OVERFLOW_WEIGHT = 4.0  # how much a candidate's time counts as grown per capacity it overflows
ROUNDS = 3


def overflow(ev) -> float:
    """Bytes over capacity summed over devices (+ a host-memory overflow: the capacity once)."""
    cap = ev.capacity_bytes
    over = float(sum(max(0, p - cap) for p in ev.peak_bytes))
    if not ev.host_fits:
        over += cap
    return over


def _promise(ev) -> float:
    """How promising an over-full strategy is to repair: its time, grown by how far its fullest
    device overflows, as the chains rank infeasible states (:func:`search.mcmc.cost_of`; a host
    that overflows weighs less here: its fixes are few and cheap)."""
    return ev.step_time_s * (1.0 + OVERFLOW_WEIGHT * fullest_overflow(ev) + (0.5 if not ev.host_fits else 0.0))


def greedy_repair(st: Strategy, ev, evaluator, ctx: SearchContext, max_steps: int | None = None,
                  recut: bool = True, swap_stage: int | None = None):
    """``(strategy, evaluation)`` that fits, reached from ``st`` by greedy fixes, or None.

    Each step takes the fix that frees the most overflow per second it adds; a fix that fits
    on the way is remembered, not taken (a fix that fits at once can cost far more than two
    cheap ones that fit together: 1F1B for GPipe against two recomputed nodes). The answer is
    the fastest that fits of all those met, the path's end included. ``recut=False``: the
    stages keep their nodes (a walk that moves nodes can leave the partition the answer needs).
    ``swap_stage``: a fix may swap another node only on that stage."""
    steps = max_steps if max_steps is not None else MAX_STEPS_PER_NODE * ctx.n + 8
    found = (st, ev) if ev.fits else None
    for _ in range(steps):
        if ev.fits:
            break
        over = overflow(ev)
        step = None
        for c in fx.fixes(st, ev, ctx, TOP_NODES, recut):
            if swap_stage is not None and any(
                    a == SWAP and b != SWAP and c.stage_of[i] != swap_stage
                    for i, (a, b) in enumerate(zip(c.actions, st.actions))):
                continue
            e, _ = evaluator.evaluate(c, st)
            if e.fits:
                if found is None or e.step_time_s < found[1].step_time_s:
                    found = (c, e)
                continue
            freed = over - overflow(e)
            if freed <= 0:
                continue
            rate = freed / (max(0.0, e.step_time_s - ev.step_time_s) + 1e-3 * ev.step_time_s)
            if step is None or rate > step[0]:
                step = (rate, c, e)
        if step is None or (found is not None and step[2].step_time_s >= found[1].step_time_s):
            break  # stuck, or every way on is already slower than a fit in hand
        st, ev = step[1], step[2]
    if ev.fits and (found is None or ev.step_time_s < found[1].step_time_s):
        found = (st, ev)
    return found


def _repairs(st: Strategy, ev, evaluator, ctx: SearchContext) -> list:
    """The answers of the greedy walks with and without moving nodes between stages (each is
    polished: the faster before polishing is not always the faster after)."""
    out = []
    walks = [(True, None), (False, None)] if st.pp > 1 else [(True, None)]
    if st.pp > 1 and ctx.cluster.host_link_shared:
        # and one per stage that swaps on that stage alone: on a link the stages share, the first swap
        # costs nothing and frees much (the best rate) and makes every later one dear, on any stage; a
        # walk that takes it on one stage can end far from the fit that recomputes there and swaps on
        # another (a GPipe re-cut: recompute on the first stage, two swaps on the second, 5% faster);
        # each such walk starts with the other stages' swaps kept (they would hold the link)
        walks += [(True, s) for s in range(st.pp)]
    for recut, only in walks:
        c, e = st, ev
        if only is not None and any(a == SWAP and st.stage_of[i] != only for i, a in enumerate(st.actions)):
            c = fx.make(st, actions=[KEEP if a == SWAP and st.stage_of[i] != only else a
                                     for i, a in enumerate(st.actions)])
            e, _ = evaluator.evaluate(c, st)
        got = greedy_repair(c, e, evaluator, ctx, recut=recut, swap_stage=only)
        if got is not None and all(got[0].key() != o[0].key() for o in out):
            out.append(got)
    return out


def repair_descent(best: Strategy | None, best_ev, evaluator, ctx: SearchContext, polish, neighbours,
                   starts: list | None = None, deadline: float | None = None):
    """Repair the fastest infeasible strategies around ``best`` (its neighbours, mesh jumps
    included), polish what fits, keep the fastest; a few rounds, each from the best so far.
    With no ``best``, first the restart points ``starts``, least over-full first, until one is
    repaired. Returns ``(best, best_ev)``. ``deadline`` (``time.perf_counter()``): past it, no
    further round or candidate starts once something fits."""
    tried: set = set()

    def late() -> bool:
        return deadline is not None and time.perf_counter() > deadline

    if best is None:
        pool = []
        for i, (_name, c) in enumerate(starts or []):
            e, _ = evaluator.evaluate(c)
            pool.append((overflow(e), e.step_time_s, i, c, e))
        pool.sort(key=lambda x: x[:3])
        for _o, _t, _i, c, e in pool:
            tried.add(c.key())
            for got in _repairs(c, e, evaluator, ctx):
                st2, ev2 = polish(*got)
                if best_ev is None or ev2.step_time_s < best_ev.step_time_s:
                    best, best_ev = st2, ev2
            if best is not None:
                break
        if best is None:
            return None, None
    for _ in range(ROUNDS):
        if late():
            break
        bad, fit = [], []
        for c in neighbours(best):
            e, _ = evaluator.evaluate(c)
            if c.key() in tried:
                continue
            if not e.fits and e.step_time_s < best_ev.step_time_s:
                bad.append((_promise(e), len(bad), c, e))
            elif e.fits and (c.dp, c.microbatches) != (best.dp, best.microbatches):
                fit.append((e.step_time_s, len(fit), c, e))
        bad.sort(key=lambda x: (x[0], x[1]))
        fit.sort(key=lambda x: (x[0], x[1]))
        # the most promising: up to CANDIDATES on best's own mesh (one step from it), and up to
        # CANDIDATES on others, at most PER_MESH from one dp × micro-batch count; and RECUTS more on
        # best's mesh that move nodes between stages: such a move overflows the stage it grows by
        # much (the promise ranks it low) yet may need only cheap fixes there (its optimizer on
        # the host) while the stage it shrinks can drop one
        own = (best.dp, best.microbatches)
        picked, per_mesh, n_own, n_other, n_recut = [], {}, 0, 0, 0
        for _k, _i, c, e in bad:
            mesh = (c.dp, c.microbatches)
            if mesh == own and c.schedule != best.schedule and c.stage_of == best.stage_of:
                picked.append((c, e))  # best's cut in the other schedule: it overflows every stage
                # (GPipe holds all micro-batches in flight) so the promise ranks it low, yet
                # recomputing all may fit it and be faster than 1F1B keeping all
            elif mesh == own and n_own < CANDIDATES:
                n_own += 1
                picked.append((c, e))
            elif mesh == own and n_recut < RECUTS and c.stage_of != best.stage_of:
                n_recut += 1
                picked.append((c, e))
            elif mesh != own and n_other < CANDIDATES and per_mesh.get(mesh, 0) < PER_MESH:
                per_mesh[mesh] = per_mesh.get(mesh, 0) + 1
                n_other += 1
                picked.append((c, e))
        # and a few that already fit on another mesh, though slower: carried over from best, they
        # keep recomputes and swaps that mesh does not need, and polishing drops them (a chain
        # that settled on one mesh rarely crosses to another through the slower states between)
        escapes, per_mesh = [], {}
        for _t, _i, c, e in fit:
            mesh = (c.dp, c.microbatches)
            if len(escapes) < ESCAPES and per_mesh.get(mesh, 0) < PER_MESH:
                per_mesh[mesh] = per_mesh.get(mesh, 0) + 1
                escapes.append((c, e))
        improved = False
        for c, e in picked + escapes:
            if late():
                break
            tried.add(c.key())
            for got in _repairs(c, e, evaluator, ctx) if not e.fits else [(c, e)]:
                st2, ev2 = polish(*got)
                if ev2.step_time_s < best_ev.step_time_s * (1 - 1e-12):
                    best, best_ev, improved = st2, ev2, True
        if not improved:
            break
    return best, best_ev
