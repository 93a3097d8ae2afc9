"""Metropolis–Hastings over strategies (FlexFlow's MCMC with MemFlow's objective).

Cost: the simulated step time while the strategy fits (every device within
capacity, host memory within the machine's). An infeasible state is never
taken as the best; it is ranked against other infeasible states by a soft
penalty on its overflow (``step × (1 + penalty_base + penalty_weight ×
overflow / capacity)``), and proposes *repair* moves with probability
``repair_prob``. A move from an infeasible to a feasible state is always
accepted; otherwise acceptance is ``min(1, exp(-β · Δcost / cost))`` —
relative, so β does not depend on the time scale. β is annealed
geometrically from ``beta0`` to ``beta1``; after ``restart_after``
iterations without a new best the chain restarts from the best. Moves that
keep dp and the micro-batch count (so the same simulator) are evaluated with
:meth:`simulator.Simulator.evaluate_delta`. The RNG is a
``numpy.random.Generator``: the same inputs and seed give the same chain.
"""
from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from memflow.kinds import ONE_F_ONE_B, SCHEDULES, SHARD_NONE, SHARD_PARAMETERS, SWAP
from memflow.strategy import Strategy

from . import fixes as fx
from . import moves as mv
from .context import SearchContext
from .pareto import ParetoFront

__all__ = ["ChainParams", "ChainResult", "Evaluator", "run_chain", "polish", "cost_of", "neighbours",
           "fullest_overflow"]


@dataclass
class ChainParams:
    iterations: Optional[int] = 4000
    time_budget_s: Optional[float] = None
    memory_aware: bool = True
    beta0: float = 5.0
    beta1: float = 100.0
    repair_prob: float = 0.85
    penalty_base: float = 0.05
    penalty_weight: float = 4.0
    restart_after: Optional[int] = None  # default: max(150, iterations // 10)
    restart_best_prob: float = 0.5  # else restart from a random start
    polish: bool = True
    progress_every: int = 250


@dataclass
class ChainResult:
    best: Optional[Strategy]
    best_eval: object
    smallest_peak: Optional[Strategy]
    smallest_peak_eval: object
    pareto: list
    iterations: int
    evaluations: int
    accepted: int
    seconds: float
    start: str = ""
    history: list = field(default_factory=list)  # (iteration, best time) at each improvement


def fullest_overflow(ev) -> float:
    """How far the fullest device overflows, as a fraction of its capacity (0 when it fits)."""
    cap = ev.capacity_bytes
    return max(0, max(ev.peak_bytes) - cap) / cap if cap else 1.0


def cost_of(ev, memory_aware: bool, p: ChainParams) -> float:
    if not memory_aware or ev.fits:
        return ev.step_time_s
    over = fullest_overflow(ev)
    if not ev.host_fits:
        over += 0.5
    return ev.step_time_s * (1.0 + p.penalty_base + p.penalty_weight * over)


class Evaluator:
    """Cached strategy evaluation (key → Evaluation) that uses ``evaluate_delta``
    when the base state shares the simulator, and feeds the Pareto front."""

    def __init__(self, ctx: SearchContext, pareto: ParetoFront | None = None, cache_size: int = 300_000):
        self.ctx = ctx
        self.cache: dict = {}
        self.cache_size = cache_size
        self.pareto = pareto if pareto is not None else ParetoFront()
        self.evaluations = 0
        self.smallest = None  # (max peak, step, strategy, eval)

    def evaluate(self, st: Strategy, base: Strategy | None = None, base_stages=None):
        """(Evaluation, stages or None)."""
        key = self.ctx.fix(st).key()
        ev = self.cache.get(key)
        if ev is not None:
            return ev, None
        sim = self.ctx.sim_for(st)
        if base is not None and base.dp == st.dp and base.microbatches == st.microbatches and base.pp == st.pp:
            ev, stg = sim.evaluate_delta(base, st, base_stages)
        else:
            ev, stg = sim.evaluate(st), None
        self.evaluations += 1
        if len(self.cache) >= self.cache_size:
            self.cache.clear()
        self.cache[key] = ev
        mp = max(ev.peak_bytes)
        self.pareto.add(ev.step_time_s, mp, st)
        sm = self.smallest
        if sm is None or (mp, ev.step_time_s) < (sm[0], sm[1]):
            self.smallest = (mp, ev.step_time_s, st, ev)
        return ev, stg


def _better(ev, best_ev, aware: bool) -> bool:
    if aware and not ev.fits:
        return False
    return best_ev is None or ev.step_time_s < best_ev.step_time_s


def neighbours(st: Strategy, ctx: SearchContext, jumps: bool = False):
    """A deterministic neighbourhood for the final local descent (``jumps``: and the mesh
    re-factorings below)."""
    n = len(st.actions)
    for k in range(n):
        for a in ctx.actions:
            if a != st.actions[k]:
                yield fx.with_action(st, k, a)
    for new in fx.shifts(st.stage_of):
        yield fx.make(st, stage_of=new)
    for m in ctx.ms[st.dp]:
        if m != st.microbatches:
            yield fx.make(st, microbatches=m)
    if st.pp > 1 and st.microbatches > 1:
        for s in SCHEDULES:
            if s != st.schedule:
                yield fx.make(st, schedule=s)
    if SWAP in st.actions:
        for d in ctx.prefetch_depths:
            if d != st.prefetch:
                yield fx.make(st, prefetch=d)
    for s in range(st.pp):
        for nb in [fx.set_shard(st, s, lv, ctx) for lv in fx.shard_levels(ctx, st.dp) if lv != st.sharding[s]] + [
                fx.set_host(st, s, not st.optimizer_on_host[s], ctx),
                fx.set_params_host(st, s, not st.params_on_host[s], ctx)]:
            if nb is not None:
                yield nb
    if not jumps:
        return
    # two nodes of one stage exchanging their actions: a recompute or swap moved to another node
    # passes through a state that is slower (both) or does not fit (neither) one flip at a time
    for i in range(n):
        for j in range(i + 1, n):
            if st.actions[i] != st.actions[j] and st.stage_of[i] == st.stage_of[j]:
                acts = list(st.actions)
                acts[i], acts[j] = acts[j], acts[i]
                yield fx.make(st, actions=acts)
    # then the larger jumps the chain makes only through infeasible states: this mesh re-cut, and
    # the mesh re-factored at every micro-batch count and schedule, balanced by time or by memory,
    # with each per-stage option on every stage, on none, or carried over by node
    if st.pp > 1:  # this mesh re-cut, balanced by time or by memory
        mb = ctx.mb_of(st)
        balanced = []
        for so in (ctx.partition(st.pp, mb, st.actions), ctx.state_partition(st.pp, mb),
                   ctx.state_partition(st.pp, mb, st.microbatches, st.schedule)):
            if so != st.stage_of and so not in balanced:
                balanced.append(so)
        for so in balanced:
            yield fx.make(st, stage_of=so)
        # and each re-cut (one node across a boundary, or balanced) with no per-stage option, in
        # this schedule and in the other: an option belongs to the stage it was set for, and a
        # moved node can leave it on a stage that no longer needs it; the other schedule holds
        # other micro-batches in flight, so a cut that was slower in this one can be the fastest
        # in that one once the over-full stage recomputes (the repair sets what the new cut needs)
        off = [False] * st.pp
        unsharded = [fx.shard_levels(ctx, st.dp)[0]] * st.pp  # (the least level the search may give)
        opts = any(x != SHARD_NONE for x in st.sharding) or any(st.optimizer_on_host)
        others = [x for x in SCHEDULES if x != st.schedule] if st.microbatches > 1 else []
        if opts:  # (this cut too, in the other schedule: the options set for this one need not serve it)
            for sched in others:
                yield fx.make(st, schedule=sched, sharding=unsharded, optimizer_on_host=off)
        for so in dict.fromkeys(tuple(x) for x in list(fx.shifts(st.stage_of)) + balanced):
            if opts:
                yield fx.make(st, stage_of=list(so), sharding=unsharded, optimizer_on_host=off)
            for sched in others:
                yield fx.make(st, stage_of=list(so), schedule=sched, sharding=unsharded,
                              optimizer_on_host=off)
    for dp in ctx.dps:
        same = dp == st.dp  # (this mesh: only the full offload, at every micro-batch count)
        if same and (any(st.params_on_host) or not ctx.allow_host):
            continue
        pp = ctx.N // dp
        shards = fx.shard_levels(ctx, dp)
        hosts = [False, True] if ctx.allow_host else [False]
        for m in ctx.ms[dp]:
            mb = ctx.global_batch // (dp * m)
            parts = [ctx.partition(pp, mb, st.actions)]
            if pp > 1:
                for by_state in (ctx.state_partition(pp, mb), ctx.state_partition(pp, mb, m)):
                    if by_state not in parts:
                        parts.append(by_state)
            for stage_of in parts:
                # each option on every stage or none, or as it was: on the new stages that hold a
                # node whose old stage had it
                sh_opts = _level_patterns(shards, st.sharding if st.dp > 1 else None, st.stage_of, stage_of, pp)
                ho_opts = _flag_patterns(hosts, st.optimizer_on_host, st.stage_of, stage_of, pp)
                scheds = ([st.schedule] + [x for x in SCHEDULES if x != st.schedule] if pp > 1 and m > 1
                          else [ONE_F_ONE_B])
                # and every stage streaming its parameters from the host (ZeRO-3's level with the
                # optimizer and parameters there; on one rank the level only with them)
                full_off = ctx.allow_host and (SHARD_PARAMETERS in shards if dp > 1 else fx.offload_on_one(ctx))
                for sched in scheds:
                    for sh in sh_opts if not same else ():
                        for ho in ho_opts:
                            yield Strategy(dp=dp, pp=pp, stage_of=list(stage_of), actions=list(st.actions),
                                           microbatches=m, schedule=sched, sharding=list(sh),
                                           optimizer_on_host=list(ho), prefetch=st.prefetch)
                    if full_off:
                        yield Strategy(dp=dp, pp=pp, stage_of=list(stage_of), actions=list(st.actions),
                                       microbatches=m, schedule=sched, sharding=[SHARD_PARAMETERS] * pp,
                                       optimizer_on_host=[True] * pp, params_on_host=[True] * pp,
                                       prefetch=st.prefetch)


def _flag_patterns(values: list[bool], old: list[bool] | None, old_stage_of: list[int], stage_of: list[int],
                   pp: int) -> list[list[bool]]:
    """Per-stage flag lists for a re-factored mesh: each of ``values`` on all ``pp`` stages and,
    when ``True`` is allowed, ``old`` carried over by node (a new stage has the flag when one of
    its nodes sat on an old stage that had it)."""
    out = [[v] * pp for v in values]
    if old is not None and True in values and any(old):
        carried = [False] * pp
        for k, s in enumerate(stage_of):
            if old[old_stage_of[k]]:
                carried[s] = True
        if carried not in out:
            out.append(carried)
    return out


def _level_patterns(levels: list[str], old: list[str] | None, old_stage_of: list[int], stage_of: list[int],
                    pp: int) -> list[list[str]]:
    """Per-stage sharding levels for a re-factored mesh: each of ``levels`` on all ``pp`` stages and
    ``old`` carried over by node (a new stage takes the most sharded level of its nodes' old stages)."""
    out = [[v] * pp for v in levels]
    if old is not None and any(x != SHARD_NONE for x in old):
        rank = {v: i for i, v in enumerate(levels)}
        carried = [levels[0]] * pp
        for k, s in enumerate(stage_of):
            o = old[old_stage_of[k]]
            if o in rank and rank[o] > rank[carried[s]]:
                carried[s] = o
        if carried not in out:
            out.append(carried)
    return out


def polish(st: Strategy, ev, evaluator: Evaluator, ctx: SearchContext, aware: bool, max_rounds: int = 50,
           jumps: bool = False, deadline: float | None = None):
    """First-improvement local descent from ``st`` over single-step neighbours (``jumps``: and
    over every dp × pp re-factoring at every micro-batch count, as a last resort each round).
    ``deadline`` (a ``time.perf_counter()`` value): stop there with the best so far (a round over a
    few hundred nodes' neighbours is thousands of evaluations)."""
    for _ in range(max_rounds):
        improved = False
        for nb in neighbours(st, ctx, jumps):
            if deadline is not None and time.perf_counter() > deadline:
                return st, ev
            e2, _ = evaluator.evaluate(nb, st)
            if _better(e2, ev, aware) and e2.step_time_s < ev.step_time_s * (1 - 1e-12):
                st, ev, improved = nb, e2, True
                break
        if not improved:
            break
    return st, ev


def _picker(names, weights):
    cum, tot = [], 0.0
    for w in weights:
        tot += w
        cum.append(tot)
    return names, cum, tot


def run_chain(ctx: SearchContext, starts: list, rng, params: ChainParams,
              progress: Callable | None = None, evaluator: Evaluator | None = None) -> ChainResult:
    """One Metropolis–Hastings chain from the first of ``starts`` ((name, Strategy) pairs;
    the others are restart points while nothing feasible is known)."""
    t0 = time.perf_counter()
    p = params
    aware = p.memory_aware
    evaluator = evaluator or Evaluator(ctx)
    iters = p.iterations
    deadline = t0 + p.time_budget_s if p.time_budget_s is not None else None
    if iters is None and deadline is None:
        iters = 4000
    horizon = iters if iters is not None else 10_000
    restart_after = p.restart_after or max(150, horizon // 10)

    mnames, mcum, mtot = _picker(list(mv.MOVES), [mv.MOVE_WEIGHTS[k] for k in mv.MOVES])
    rnames, rcum, rtot = _picker(list(mv.REPAIRS), [mv.REPAIR_WEIGHTS[k] for k in mv.REPAIRS])

    best = best_ev = None
    start_name, cur = starts[0]
    cur_ev, cur_stg = evaluator.evaluate(cur)
    cur_cost = cost_of(cur_ev, aware, p)
    for name, s in starts:  # every start is a candidate for the best
        e, _ = evaluator.evaluate(s)
        if _better(e, best_ev, aware):
            best, best_ev = s, e
    history = [(0, best_ev.step_time_s)] if best_ev is not None else []
    state = mv.State(cur, cur_ev)
    accepted = 0
    last_improve = 0
    it = 0
    log_ratio = math.log(p.beta1 / p.beta0)
    while True:
        if iters is not None and it >= iters:
            break
        if deadline is not None and (it & 31) == 0 and time.perf_counter() >= deadline:
            break
        it += 1
        frac = it / horizon if iters is not None else min(1.0, (time.perf_counter() - t0) / p.time_budget_s)
        beta = p.beta0 * math.exp(log_ratio * min(frac, 1.0))
        if aware and not cur_ev.fits and rng.random() < p.repair_prob:
            name = rnames[bisect.bisect_right(rcum, rng.random() * rtot)]
            fn = mv.REPAIRS[name]
        else:
            name = mnames[bisect.bisect_right(mcum, rng.random() * mtot)]
            fn = mv.MOVES[name]
        new = fn(state, rng, ctx)
        if new is not None:
            ev, stg = evaluator.evaluate(new, cur, cur_stg)
            c = cost_of(ev, aware, p)
            if aware and ev.fits and not cur_ev.fits:
                ok = True
            elif c <= cur_cost:
                ok = True
            else:
                ok = rng.random() < math.exp(-beta * (c - cur_cost) / cur_cost)
            if ok:
                cur, cur_ev, cur_stg, cur_cost = new, ev, stg, c
                state = mv.State(cur, cur_ev)
                accepted += 1
                if _better(ev, best_ev, aware):
                    best, best_ev = cur, ev
                    last_improve = it
                    history.append((it, ev.step_time_s))
        if it - last_improve >= restart_after:
            last_improve = it
            if best is not None and rng.random() < p.restart_best_prob:
                cur = best
            else:
                cur = starts[int(rng.integers(len(starts)))][1]
            cur_ev, cur_stg = evaluator.evaluate(cur)
            cur_cost = cost_of(cur_ev, aware, p)
            state = mv.State(cur, cur_ev)
        if progress is not None and it % p.progress_every == 0:
            progress(it, best_ev.step_time_s if best_ev is not None else None, best is not None)
    if p.polish and best is not None:  # (a time budget's chain polishes within a quarter of it more)
        late = None if deadline is None else deadline + 0.25 * p.time_budget_s
        b2, e2 = polish(best, best_ev, evaluator, ctx, aware, deadline=late)
        if e2.step_time_s < best_ev.step_time_s:
            best, best_ev = b2, e2
            history.append((it, e2.step_time_s))
    if progress is not None:
        progress(it, best_ev.step_time_s if best_ev is not None else None, best is not None)
    sm = evaluator.smallest
    return ChainResult(
        best=best, best_eval=best_ev, smallest_peak=sm[2] if sm else None, smallest_peak_eval=sm[3] if sm else None,
        pareto=evaluator.pareto.points(), iterations=it, evaluations=evaluator.evaluations, accepted=accepted,
        seconds=time.perf_counter() - t0, start=start_name, history=history,
    )

