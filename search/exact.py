"""Exact solver for small instances: enumeration with exact pruning.

Space: every dp × pp factorisation, every contiguous partition into pp
stages, every per-node action of ``ctx.actions`` (keep / recompute / swap / selective), every valid micro-batch
count, both schedules, each swap-in depth where something is swapped on a device that
prefetches (``ctx.prefetch_depths``), and (``flags=True``) each searched sharding level /
optimizer_on_host per stage. Objective: the smallest simulated step time among strategies that
fit; it is what the MCMC's optimality gap is measured against.

Pruning (``prune=True``; all of it exact):

* a stage's memory and per-micro-batch figures depend only on its own node
  range, actions and options (and dp, the micro-batch size): options whose
  stage peak exceeds capacity are dropped (that device would be over-full
  whatever the other stages do);
* among one stage's options with the same (shard, host) flags, an option
  whose forward time, backward time, host-copy time, swapped bytes and every
  bucket-ready offset are all ≥ another's is dropped: the step time is
  monotone (max-plus) in these, and host memory in the swapped bytes;
* with a single micro-batch, 1F1B and GPipe are the same schedule;
* branch and bound: a stage's figures bound the step time from below
  (:func:`stage_bound`: its m forwards and backwards, its last gradient
  bucket's all-reduce, its host copies, then its optimizer step and ZeRO-1
  broadcast), so options (sorted by that bound) stop once it reaches the best.

With ``cluster.host_link_shared`` the stages interact through the host link's
shared bandwidth (a stage that swaps gets a share that depends on the others),
so the dominance pruning is off. The other two still hold, with each stage
evaluated at the whole link's bandwidth: a smaller share only delays copies,
so a stage's peak (its swapped buffers leave the device later, and come back
at fixed phases) and its times can only grow.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from memflow.kinds import OFFLOAD_NONE, OFFLOAD_PARAMETERS, ONE_F_ONE_B, SCHEDULES, SHARD_NONE, SHARD_PARAMETERS, SWAP
from memflow.simulator.stage import stage_peak
from memflow.strategy import Strategy

from .context import GraphProvider, SearchContext
from .fixes import offload_on_one

__all__ = ["ExactResult", "solve_exact", "space_size", "pareto_min"]


@dataclass
class ExactResult:
    best: Optional[Strategy]
    best_eval: object
    evaluated: int  # full strategies simulated
    space: int  # strategies in the enumerated space
    seconds: float
    pruned: bool
    complete: bool = True  # False: stopped at its time limit (``best`` is the best so far)


class _OutOfTime(Exception):
    pass


def _flag_opts(ctx: SearchContext, dp: int, flags: bool):
    """A stage's per-stage options ``(sharding level, optimizer on the host, parameters on the
    host)``: the parameters only at ZeRO-3 with the optimizer on the host (on one rank: the level
    only with them, :func:`search.fixes.offload_on_one`); an offload the user fixed, only it."""
    sh = list(ctx.shard_levels) if (flags and dp > 1 and ctx.allow_shard) else [SHARD_NONE]
    ho = [False, True] if (flags and ctx.allow_host) else [False]
    out = [(a, b, c) for a in sh for b in ho for c in ((False, True) if b and a == SHARD_PARAMETERS and dp > 1
                                                         else (False,))]
    if flags and dp == 1 and offload_on_one(ctx):
        out.append((SHARD_PARAMETERS, True, True))
    off = ctx.fixed_offload
    if off is not None:
        out = [f for f in out if (f[1], f[2]) == (off != OFFLOAD_NONE, off == OFFLOAD_PARAMETERS)]
    return out


def space_size(ctx: SearchContext, flags: bool = True) -> int:
    n, tot = ctx.n, 0
    A = len(ctx.actions)
    for dp in ctx.dps:
        pp = ctx.N // dp
        parts = math.comb(n - 1, pp - 1)
        f = len(_flag_opts(ctx, dp, flags)) ** pp
        for m in ctx.ms[dp]:
            tot += parts * f * (A ** n) * len(SCHEDULES)
    if len(ctx.prefetch_depths) > 1:  # (each depth but the first: only the action lists with a swap)
        tot += tot * (len(ctx.prefetch_depths) - 1) * (A ** n - (A - 1) ** n) // (A ** n)
    return tot


def pareto_min(sigs: np.ndarray) -> list[int]:
    """Indices of rows not dominated (≤ everywhere) by another row; of equal rows the first; in
    increasing order.

    The rows are visited in lexicographic order (equal rows by index): a row's dominators, and the
    rows equal to it before it, come first. A row dominated by any row is then held ≤ everywhere by
    one kept before it (dominance is transitive), so each row is compared with the kept ones only
    (a few, not all: thousands of rows per stage in the exact solver)."""
    g = len(sigs)
    if g == 0:
        return []
    order = np.lexsort(sigs.T[::-1])  # (stable: equal rows in index order)
    kept: list[int] = []
    front = np.empty((0, sigs.shape[1]), dtype=sigs.dtype)
    for i in order:
        row = sigs[i]
        if len(kept) and np.any(np.all(front <= row, axis=1)):
            continue
        kept.append(int(i))
        front = np.vstack([front, row])
    return sorted(kept)


def stage_bound(sim, sh, s: int, ev, m: int, hbw: float) -> float:
    """A lower bound on the step time of any strategy whose stage ``s`` (of shape ``sh``: mesh,
    ranges, micro-batches, schedule, this stage's flags) has the per-micro-batch figures ``ev``.

    The stage runs its m forwards and m backwards one after another, so its last backward ends no
    earlier than ``m·(fwd + bwd)``; that backward starts no earlier than ``m·fwd + (m-1)·bwd``, its
    first gradient bucket is ready ``bwd_node_end`` later, and the buckets' all-reduces run one after
    another from there; the host-copy stream is busy ``m·host`` at least; the optimizer step and the
    ZeRO-1 broadcast follow all of that (as :class:`~memflow.simulator.Simulator` combines them)."""
    f, b = ev.fwd_s, ev.bwd_s
    t = m * (f + b)
    if sh.dp > 1 and sh.buckets[s]:
        bk = sh.buckets[s]
        ar = m * f + (m - 1) * b + ev.bwd_node_end[bk[0][0]] + sum(xf for _, xf, _ in bk) + len(bk) * sh.lfac[s]
        if ar > t:
            t = ar
    if m * ev.host_s > t:
        t = m * ev.host_s
    return t + sim.stage_figures(sh, s, ev, hbw)[1] + sh.ag[s]


def solve_exact(graphs: GraphProvider | None = None, global_batch: int | None = None, cluster=None, *,
                ctx: SearchContext | None = None, flags: bool = True, prune: bool = True,
                upper_bound: float = math.inf, max_microbatches: int | None = None,
                time_limit_s: float | None = None) -> ExactResult:
    """The fastest strategy that fits (``best`` None when nothing fits). With ``time_limit_s`` it
    stops there and says so (``complete=False``; ``best`` is then the best found so far)."""
    t0 = time.perf_counter()
    deadline = t0 + time_limit_s if time_limit_s is not None else math.inf
    if ctx is None:
        ctx = SearchContext(graphs, global_batch, cluster, max_microbatches=max_microbatches)
    n, N = ctx.n, ctx.N
    dominance = prune and not ctx.cluster.host_link_shared
    bw = ctx.cluster.host_link.bandwidth
    best, best_ev, best_t = None, None, upper_bound
    evaluated = 0
    group_cache: dict = {}

    def stage_group(sim, mb, a, b, sh, ho, dp, ph=False, pf=1):
        """[(acts, StageEval, sig)] of one stage range with fixed flags (dominance-pruned later). At a
        swap-in depth past the first, an action list without a swap is the first depth's (a stage
        that swaps nothing has the same figures at every depth): taken from there, not evaluated."""
        key = (mb, a, b, sh, ho, dp, ph, pf)
        g = group_cache.get(key)
        if g is None:
            first = stage_group(sim, mb, a, b, sh, ho, dp, ph, 1) if pf != 1 else None
            g = []
            for i, acts in enumerate(itertools.product(ctx.actions, repeat=b - a)):
                if not (i + 1) % 4096 and time.perf_counter() > deadline:
                    raise _OutOfTime
                if first is not None and SWAP not in acts:
                    g.append(first[i])
                    continue
                ev = sim.stage_eval(a, b, acts, shard=sh, opt_host=ho, dp=dp, host_bw=bw, params_host=ph,
                                    prefetch=pf)
                g.append((acts, ev, (ev.fwd_s, ev.bwd_s, ev.host_s, float(ev.swap_bytes), *ev.bwd_node_end)))
            group_cache[key] = g
        return g

    acts0 = [ctx.actions[0]] * n
    def _enumerate() -> None:
        for dp in ctx.dps:
            pp = N // dp
            fl = _flag_opts(ctx, dp, flags)
            for cuts in itertools.combinations(range(1, n), pp - 1):
                bounds = [0, *cuts, n]
                ranges = [(bounds[i], bounds[i + 1]) for i in range(pp)]
                stage_of = [s for s, (a, b) in enumerate(ranges) for _ in range(a, b)]
                for m in ctx.ms[dp]:
                    mb = ctx.global_batch // (dp * m)
                    sim = ctx.sim(mb)
                    cap = sim.capacity
                    scheds = SCHEDULES if (pp > 1 and (m > 1 or not prune)) else (ONE_F_ONE_B,)
                    if pp == 1 and not prune:
                        scheds = SCHEDULES
                    for sched, pf in itertools.product(scheds, ctx.prefetch_depths):
                        if not prune:
                            per_stage = [[(0.0, acts, f) for f in fl
                                          for acts in itertools.product(ctx.actions, repeat=b - a)] for a, b in ranges]
                        else:
                            per_stage = []
                            shapes = {f: sim.shape(Strategy(dp=dp, pp=pp, stage_of=list(stage_of), actions=acts0,
                                                             microbatches=m, schedule=sched, sharding=[f[0]] * pp,
                                                             optimizer_on_host=[f[1]] * pp,
                                                             params_on_host=[f[2]] * pp, prefetch=pf))
                                      for f in fl}
                            for s, (a, b) in enumerate(ranges):
                                opts = []
                                for f in fl:
                                    k = shapes[f].inflight[s]
                                    g = [x for x in stage_group(sim, mb, a, b, f[0], f[1], dp, f[2], pf)
                                         if stage_peak(x[1], k, m)[0] <= cap]
                                    if not g:
                                        continue
                                    idx = pareto_min(np.array([x[2] for x in g])) if dominance else range(len(g))
                                    for i in idx:
                                        opts.append((stage_bound(sim, shapes[f], s, g[i][1], m, bw), g[i][0], f))
                                if not opts:
                                    per_stage = None
                                    break
                                opts.sort(key=lambda o: o[0])
                                per_stage.append(opts)
                            if per_stage is None:
                                continue
                        # depth-first product with the bound
                        choice = [None] * pp

                        def dfs(s: int, lb: float, swaps: bool):
                            nonlocal best, best_ev, best_t, evaluated
                            if s == pp:
                                acts = [x for c in choice for x in c[1]]
                                st = Strategy(dp=dp, pp=pp, stage_of=list(stage_of), actions=acts, microbatches=m,
                                              schedule=sched, sharding=[c[2][0] for c in choice],
                                              optimizer_on_host=[c[2][1] for c in choice],
                                              params_on_host=[c[2][2] for c in choice], prefetch=pf)
                                ev = sim.evaluate(st)
                                evaluated += 1
                                if ev.fits and ev.step_time_s < best_t:
                                    best, best_ev, best_t = st, ev, ev.step_time_s
                                if not evaluated % 256 and time.perf_counter() > deadline:
                                    raise _OutOfTime
                                return
                            # past the first depth, a strategy without a swap is the first depth's: the
                            # last stage then takes only its options with one
                            need = pf > 1 and not swaps and s == pp - 1
                            for o in per_stage[s]:
                                v = o[0] if o[0] > lb else lb
                                if prune and v >= best_t:
                                    break
                                if need and SWAP not in o[1]:
                                    continue
                                choice[s] = o
                                dfs(s + 1, v, swaps or SWAP in o[1])

                        dfs(0, 0.0, False)

    try:
        _enumerate()
        complete = True
    except _OutOfTime:
        complete = False
    return ExactResult(best=best, best_eval=best_ev, evaluated=evaluated, space=space_size(ctx, flags),
                       seconds=time.perf_counter() - t0, pruned=prune, complete=complete)
