"""``search(graphs, global_batch, cluster, ...) -> SearchResult``: the planner's search.

Runs ``chains`` Metropolis–Hastings chains (with ``processes`` > 1: the
first here, the other chains beside it in a forked child that inherits the
context and the memory-unaware search in another, or, without fork, all in a
pool of worker processes) from the seed strategies, each with its own RNG spawned
from ``numpy.random.SeedSequence(seed)``, and reports the fastest strategy
that fits, the baselines beside it, and the Pareto front of (step time, max
peak memory) over every strategy evaluated. The result does not depend on
``processes``: the same inputs and seed give the same plan (with an
iteration budget; a time budget stops wherever the clock says).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from memflow.strategy import Strategy

from .baselines import fixed_baselines, memory_unaware_search
from .context import GraphProvider, MeshLimits, SearchContext
from memflow.forking import ForkedJobs
from .mcmc import ChainParams, ChainResult, Evaluator, cost_of, neighbours, polish, run_chain
from .pareto import ParetoFront
from .repair import repair_descent
from .seeds import frugal_strategies, start_pool
from .simplify import simplify

__all__ = ["search", "SearchResult", "default_iterations"]


@dataclass
class SearchResult:
    best: Optional[Strategy]
    best_eval: object
    fits: bool
    baselines: dict  # name -> (Strategy, Evaluation)
    pareto: list  # (step_time_s, max_peak_bytes, Strategy), sorted by time
    iterations: int
    seconds: float
    seed: int
    smallest_peak: Optional[tuple] = None  # (Strategy, Evaluation) with the lowest max peak seen
    evaluations: int = 0
    chains: list = field(default_factory=list)  # per chain: dict(start, best time, iterations, accepted, seconds)

    def summary(self) -> str:
        lines = []
        if self.best is not None:
            e = self.best_eval
            lines.append(f"best: {self.best.summary()} — step {e.step_time_s * 1e3:.3f} ms, "
                         f"max peak {max(e.peak_bytes) / 2**30:.2f}/{e.capacity_bytes / 2**30:.2f} GiB")
        else:
            lines.append("nothing fits")
            if self.smallest_peak:
                st, e = self.smallest_peak
                lines.append(f"smallest peak: {st.summary()} — {max(e.peak_bytes) / 2**30:.2f}/"
                             f"{e.capacity_bytes / 2**30:.2f} GiB")
        lines.append(f"{self.iterations} iterations, {self.evaluations} evaluations, {self.seconds:.2f} s, "
                     f"seed {self.seed}")
        for name, (st, e) in self.baselines.items():
            lines.append(f"  {name:24s} {e.step_time_s * 1e3:10.3f} ms  peak {max(e.peak_bytes) / 2**30:7.2f} GiB"
                         f"  {'fits' if e.fits else 'DOES NOT FIT'}")
        return "\n".join(lines)


def default_iterations(n_nodes: int) -> int:
    """Iterations per chain when no budget is given."""
    return 1500 + 150 * n_nodes


def _ordered_starts(ctx: SearchContext, evaluator: Evaluator, params: ChainParams) -> list:
    seeds = start_pool(ctx)
    scored = []
    for i, (name, st) in enumerate(seeds):
        ev, _ = evaluator.evaluate(st)
        aware = params.memory_aware
        scored.append(((0 if (ev.fits or not aware) else 1, cost_of(ev, aware, params), i), name, st))
    scored.sort(key=lambda x: x[0])
    return [(name, st) for _, name, st in scored]


def _chain_task(args) -> ChainResult:
    (graphs, global_batch, cluster, ctx_kw, starts, seed_seq, params, unaware) = args
    ctx = SearchContext(graphs, global_batch, cluster, **ctx_kw)
    rng = np.random.default_rng(seed_seq)
    if unaware:
        return memory_unaware_search(ctx, rng, params)
    return run_chain(ctx, starts, rng, params)


def search(graphs: GraphProvider, global_batch: int, cluster, *, seed: int = 0, iterations: int | None = None,
           time_budget_s: float | None = None, chains: int = 2, processes: int = 1, memory_aware: bool = True,
           progress: Callable | None = None, baselines: bool = True, unaware_fraction: float = 0.5,
           max_microbatches: int | None = None, limits: MeshLimits | None = None,
           params: ChainParams | None = None,
           start_method: str | None = None) -> SearchResult:
    """Find the fastest strategy that fits.

    ``graphs``: micro-batch size → TaskGraph (a callable, or a mapping holding every
    size needed), costed for the cluster's device. ``iterations`` is per chain;
    ``time_budget_s`` is for the whole search, wall-clock (the chains and the
    memory-unaware search share it as they run: side by side with processes).
    Without either, :func:`default_iterations`. ``progress(iteration, best_time_s | None, feasible)``
    is called from the (first) chain in this process. ``baselines`` adds the seeds,
    Chen's √n checkpointing and a memory-unaware search (``unaware_fraction`` of
    the budget). ``limits``: the parts of the strategy fixed by the caller (dp, pp, micro-batches, a
    bound on micro-batches); the chains, the seeds and the baselines stay within them."""
    t0 = time.perf_counter()
    ctx_kw = {"max_microbatches": max_microbatches, "limits": limits}
    ctx = SearchContext(graphs, global_batch, cluster, **ctx_kw)
    if iterations is None and time_budget_s is None:
        iterations = default_iterations(ctx.n)
    p = ChainParams(**{**(params.__dict__ if params else ChainParams().__dict__),
                       "iterations": iterations, "time_budget_s": time_budget_s, "memory_aware": memory_aware})
    chains = max(1, int(chains))
    whole_budget_s = time_budget_s
    if time_budget_s is not None:
        # the budget is wall-clock for the whole search: here the chains run one after another;
        # forked, the first chain runs here, the other chains one after another in one child and the
        # memory-unaware search in another; in a pool, the first chain and then the memory-unaware
        # search take one worker while the other chains take the others
        extra = unaware_fraction if (baselines and memory_aware) else 0.0
        forked = processes > 1 and chains > 1 and start_method in (None, "fork")
        share = (chains + extra if processes <= 1 else max(1.0, chains - 1.0) if forked
                 else max(1.0 + extra, chains - 1.0))
        time_budget_s = time_budget_s / share
        p = ChainParams(**{**p.__dict__, "time_budget_s": time_budget_s})
    evaluator = Evaluator(ctx)
    starts = _ordered_starts(ctx, evaluator, p)
    ss = np.random.SeedSequence(seed).spawn(chains + 1)
    starts_i = [starts[i % len(starts):] + starts[:i % len(starts)] for i in range(chains)]
    want_unaware = baselines and memory_aware
    up = ChainParams(**{**p.__dict__, "memory_aware": False, "polish": p.polish,
                        "iterations": max(1, int(iterations * unaware_fraction)) if iterations else None,
                        "time_budget_s": time_budget_s * unaware_fraction if time_budget_s else None})

    results: list[ChainResult]
    unaware_res: ChainResult | None = None

    def chain(i: int) -> ChainResult:
        return run_chain(ctx, starts_i[i], np.random.default_rng(ss[i]), p,
                         progress=progress if i == 0 else None, evaluator=evaluator if i == 0 else Evaluator(ctx))

    def unaware() -> ChainResult:
        return memory_unaware_search(ctx, np.random.default_rng(ss[chains]), up)

    def rest() -> list:  # every chain but the first
        return [chain(i) for i in range(1, chains)]

    child = aside = None
    # with no more cores than chains (and no time budget to share), the memory-unaware search starts
    # once the chains are through, beside this process's last descents instead of beside both chains:
    # three processes on two cores finished the chains later and left the descents alone (a cold
    # GPT-2-medium plan on 8 GPUs, 2 cores: 1.9 -> 1.6 s); it meets the chains' layouts warm
    later = want_unaware and time_budget_s is None and (os.cpu_count() or 1) <= chains
    if processes > 1 and chains > 1 and start_method in (None, "fork"):
        child = ForkedJobs(rest)  # the first chain here, the rest beside it, and the memory-unaware
        # search beside both (it is shorter than a chain: behind the first, it was the search's tail)
        if child.running and want_unaware and not later:
            aside = ForkedJobs(unaware)
    if child is not None and child.running:
        results = [chain(0)]
        if want_unaware and not later:
            unaware_res = aside.result() if aside is not None else None
            if unaware_res is None:
                unaware_res = unaware()
        got = child.result()
        results += got if got is not None else rest()
        if later:
            aside = ForkedJobs(unaware)
            if not aside.running:
                aside = None
                unaware_res = unaware()
    elif processes > 1 and (chains > 1 or want_unaware):
        gdict = ctx.graphs_dict()
        tasks = [(gdict, global_batch, cluster, ctx_kw, starts_i[i], ss[i], p, False) for i in range(chains)]
        if want_unaware:
            tasks.append((gdict, global_batch, cluster, ctx_kw, None, ss[chains], up, True))
        method = start_method or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        with mp.get_context(method).Pool(min(processes, len(tasks))) as pool:
            out = pool.map(_chain_task, tasks, chunksize=1)
        results = out[:chains]
        if want_unaware:
            unaware_res = out[chains]
    else:
        results = [chain(i) for i in range(chains)]
        if want_unaware:
            unaware_res = unaware()

    # ---- merge (in chain order: deterministic)
    best = best_ev = None
    front = ParetoFront()
    sm = None
    for r in results:
        if r.best is not None and (best_ev is None or r.best_eval.step_time_s < best_ev.step_time_s):
            best, best_ev = r.best, r.best_eval
        front.extend(r.pareto)
        if r.smallest_peak is not None:
            k = (max(r.smallest_peak_eval.peak_bytes), r.smallest_peak_eval.step_time_s)
            if sm is None or k < sm[0]:
                sm = (k, r.smallest_peak, r.smallest_peak_eval)
    # the last descents keep to a time budget too: a quarter of it past its end at most (one round
    # of a descent over a few hundred nodes is thousands of evaluations)
    late = None if whole_budget_s is None else t0 + 1.25 * whole_budget_s
    if best is not None and memory_aware and p.polish:
        # one last descent from the merged best that may also re-factor the mesh: the chains
        # reach another dp × pp with other per-stage options only through infeasible states
        b2, e2 = polish(best, best_ev, evaluator, ctx, True, jumps=True, deadline=late)
        if e2.step_time_s < best_ev.step_time_s:
            best, best_ev = b2, e2
    if memory_aware and p.polish:
        # and the most promising faster strategies around it that do not fit (the restart points,
        # if nothing fits), each repaired greedily and polished: a chain seldom walks that many fixes
        best, best_ev = repair_descent(best, best_ev, evaluator, ctx,
                                       polish=lambda s, e: polish(s, e, evaluator, ctx, True, deadline=late),
                                       neighbours=lambda s: neighbours(s, ctx, jumps=True),
                                       starts=starts if best is not None else starts + frugal_strategies(ctx),
                                       deadline=late)
        if best is not None:  # and nothing in it that buys no time
            best, best_ev = simplify(best, best_ev, evaluator, ctx)
    base = fixed_baselines(ctx, evaluator) if baselines else {}
    if memory_aware:  # a fitting baseline the chains did not beat (they start from the seeds only) is
        # where the plan starts instead: the plan is never slower than a baseline it reports
        won = [(e.step_time_s, name) for name, (st, e) in base.items()
               if e.fits and (best_ev is None or e.step_time_s < best_ev.step_time_s)]
        if won:
            best, best_ev = base[min(won)[1]]
            if p.polish:
                best, best_ev = polish(best, best_ev, evaluator, ctx, True, deadline=late)
                best, best_ev = simplify(best, best_ev, evaluator, ctx)
    front.extend(evaluator.pareto.points())
    if later and aside is not None:
        unaware_res = aside.result()
        if unaware_res is None:  # (the forked search failed: run here)
            unaware_res = unaware()
    if unaware_res is not None and unaware_res.best is not None:
        base["memory-unaware search"] = (unaware_res.best, unaware_res.best_eval)
    return SearchResult(
        best=best, best_eval=best_ev, fits=best is not None, baselines=base, pareto=front.points(),
        iterations=sum(r.iterations for r in results), seconds=time.perf_counter() - t0, seed=seed,
        smallest_peak=(sm[1], sm[2]) if sm else None,
        evaluations=sum(r.evaluations for r in results) + (unaware_res.evaluations if unaware_res else 0),
        chains=[{"start": r.start, "best_time_s": r.best_eval.step_time_s if r.best_eval else None,
                 "iterations": r.iterations, "evaluations": r.evaluations, "accepted": r.accepted,
                 "seconds": r.seconds} for r in results],
    )
