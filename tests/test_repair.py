"""Greedy repair (search/repair.py): the boundary cascade its fixes move nodes by
(search/fixes.py), that a repair fits or says it cannot, and the search instances it was
written for (each missed the exact optimum before)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from memflow.cluster import Cluster
from memflow.graph.record import KIND_ACTIVATION, Buffer, Node, TaskGraph
from memflow.strategy import Strategy
from memflow.search import SearchContext, search, solve_exact
from memflow.search.mcmc import Evaluator
from memflow.search import fixes as fixes_module
from memflow.search.fixes import cascade
from memflow.search.repair import greedy_repair, overflow
from memflow.search.seeds import start_pool
from test_search import GB, provider, tight_cluster


def test_cascade_moves_one_node_between_any_two_stages():
    rs = np.random.default_rng(0)
    for _ in range(300):
        n, pp = int(rs.integers(2, 12)), None
        pp = int(rs.integers(2, n + 1))
        cuts = sorted(rs.choice(np.arange(1, n), size=pp - 1, replace=False).tolist())
        so = [sum(k >= c for c in cuts) for k in range(n)]
        sizes = [so.count(j) for j in range(pp)]
        s = int(rs.integers(pp))
        if sizes[s] < 2:
            continue
        for t in range(pp):
            if t == s:
                continue
            new = cascade(so, s, t)
            assert new == sorted(new) and new[0] == 0 and new[-1] == pp - 1  # still contiguous stages
            want = list(sizes)
            want[s] -= 1
            want[t] += 1
            assert [new.count(j) for j in range(pp)] == want


@pytest.mark.parametrize("kind,n,ndev,frac,gseed,shared", [
    ("chain", 4, 2, 0.25, 895, True), ("chain", 6, 3, 0.25, 339, False), ("random", 7, 4, 0.25, 303, False),
    ("random", 5, 2, 0.6, 4, False)])
def test_greedy_repair_fits_or_gives_up(kind, n, ndev, frac, gseed, shared):
    """From every restart point: the repair's answer fits, and it has one only where the
    exact solver finds something that fits; across the points it finds one wherever that is so."""
    g = provider(kind, n, gseed)
    cl = tight_cluster(g, ndev, frac)
    if shared:
        cl = dataclasses.replace(cl, host_link_shared=True)
    ctx = SearchContext(g, GB, cl)
    ev = Evaluator(ctx)
    ex = solve_exact(g, GB, cl)
    found = False
    for _name, st in start_pool(ctx):
        e, _ = ev.evaluate(st)
        got = greedy_repair(st, e, ev, ctx)
        if got is not None:
            st2, e2 = got
            assert e2.fits and overflow(e2) == 0 and ctx.valid(st2)
            assert ctx.sim_for(st2).evaluate(st2).fits  # the cached answer is the simulator's
            found = True
    assert found == (ex.best is not None)


# (kind, nodes, devices, memory fraction, graph seed, host link shared, search seed): the default
# search missed the exact optimum on each (by 4-22%, or found nothing at all) before the repair
# (the sixth until the repair also walked without moving nodes between stages; the seventh, by
# 64%, until the descent also repaired the two most promising moves of nodes between best's
# stages; the eighth, by 7.1%, until the jumps also re-cut the mesh with no per-stage option; the
# ninth, by 2.6%, until they also re-cut it in the other schedule: GPipe on a new cut, recomputing;
# the tenth, finding nothing, until the restart points included pipelines balanced by memory with
# 1F1B's micro-batches in flight; the last, by 2.5%, until the descent also polished strategies
# that fit on another mesh; the sixth again, by 12.8%, once the host's optimizer step cost what it
# measures, until the descent also repaired best's own cut in the other schedule without its
# per-stage options; the ninth again, by 5.1%, once a swap whose copy out is still running at its
# prefetch stopped stalling the backward (swaps got cheaper), until the repair also walked swapping
# on one stage alone: on the shared host link its free first swap went to the wrong stage)
MISSED = [("chain", 6, 2, 0.85, 573, True, 91), ("chain", 4, 2, 0.25, 895, True, 20),
          ("chain", 6, 3, 0.25, 339, False, 97), ("chain", 4, 2, 0.7, 768, True, 21),
          ("random", 7, 4, 0.35, 632, False, 81), ("chain", 5, 3, 0.35, 832, True, 72),
          ("chain", 7, 4, 0.25, 929, True, 87), ("random", 6, 4, 0.45, 183, False, 50),
          ("random", 7, 3, 0.45, 96, True, 63), ("random", 5, 4, 0.35, 388, False, 41),
          ("random", 7, 4, 0.45, 684, False, 34)]


@pytest.mark.parametrize("kind,n,ndev,frac,gseed,shared,seed", MISSED)
def test_search_finds_what_it_missed(kind, n, ndev, frac, gseed, shared, seed):
    g = provider(kind, n, gseed)
    cl = tight_cluster(g, ndev, frac)
    if shared:
        cl = dataclasses.replace(cl, host_link_shared=True)
    r = search(g, GB, cl, seed=seed, baselines=False)
    assert r.best is not None and r.best_eval.fits
    # within 2% of the optimum: nothing that fits is faster than the search's answer / 1.02 (the exact
    # solver bounded there: the same question, its branch and bound pruning from the start)
    ex = solve_exact(g, GB, cl, upper_bound=r.best_eval.step_time_s / 1.02)
    assert ex.complete and ex.best is None, (ex.complete, ex.best_eval and ex.best_eval.step_time_s,
                                             r.best_eval.step_time_s)


def _shared_saved_graph() -> TaskGraph:
    """Three nodes, one micro-batch of one sample, no parameters: node 0 makes X (64 MiB), which its
    own backward and node 1's read (both saved it); node 2's forward needs 64 MiB of its own. The
    peak is F2's: X beside node 2's working memory."""
    mib = 1 << 20
    nodes = [Node(index=k, name=f"n{k}", module_path=f"n{k}", fwd_time_s=20e-3, bwd_time_s=40e-3,
                  saved_tensors=1 if k < 2 else 0) for k in range(3)]
    nodes[2].fwd_transient_bytes = 64 * mib
    # phases F0 F1 F2 B2 B1 B0 = 0..5
    bufs = [Buffer(64 * mib, 0, 5, KIND_ACTIVATION, [1, 4, 5]),  # X: read by F1, saved by nodes 0 and 1
            Buffer(mib, 1, 3, KIND_ACTIVATION, [2, 3]),  # node 1's output, read by node 2
            Buffer(mib, 2, 3, KIND_ACTIVATION, [3])]  # the loss's input
    return TaskGraph(model_name="shared-saved", batch_size=1, dtype="fp32", nodes=nodes, buffers=bufs)


def test_greedy_repair_frees_a_whole_stage(monkeypatch):
    """Where a stage's peak falls while two of its nodes hold one tensor, recomputing or swapping
    either alone frees nothing (the other still holds it; a recomputed node's checkpoint holds its
    inputs); the repair also tries every kept node of the stage at once: both swapped, X is on the
    host through F2. Without that move the walk is stuck (no state to move, one sample: no more
    micro-batches) and the exact solver agrees that both swapped is the only plan that fits."""
    g = _shared_saved_graph()
    cl = Cluster.for_gpus(1, "v100-16gb").with_memory(100 << 20)  # under X + 64 MiB, over either alone
    ctx = SearchContext(lambda mb: g, 1, cl)
    st = Strategy.single(3)
    e, _ = Evaluator(ctx).evaluate(st)
    assert not e.fits
    got = greedy_repair(st, e, Evaluator(ctx), ctx, recut=False)
    assert got is not None and got[1].fits and got[0].actions[:2] == ["swap", "swap"]
    monkeypatch.setattr(fixes_module, "free_stage", lambda st, s, action: st)  # (the walk without the move)
    assert greedy_repair(st, e, Evaluator(ctx), ctx, recut=False) is None
    ex = solve_exact(lambda mb: g, 1, cl)
    assert ex.best is not None and ex.best.actions[:2] == ["swap", "swap"]
    assert got[1].step_time_s <= ex.best_eval.step_time_s * 1.01  # (unpolished: node 2's empty swap costs a latency)


def test_final_descent_exchanges_two_nodes_actions():
    """The search's own answer on a held-out instance recomputed node 3 where the optimum
    recomputes node 0 (1.4% faster): one flip at a time the way there is slower (both
    recomputed) or over capacity (neither). The final descent's neighbourhood exchanges two
    nodes' actions, and from that answer reaches the exact optimum. (The level is fixed to none,
    the strategy's: with ZeRO-3 the optimum keeps node 1 as well, a change of level, not of actions.)"""
    from memflow.search import MeshLimits
    from memflow.search.mcmc import polish

    g = provider("random", 7, 368)
    cl = dataclasses.replace(tight_cluster(g, 2, 0.85), host_link_shared=True)
    ctx = SearchContext(g, GB, cl, limits=MeshLimits(sharding="none"))
    ctx.prefetch_depths = (1,)  # (the instance as it was held out: a deeper swap-in is a single move)
    ev = Evaluator(ctx)
    ex = solve_exact(ctx=ctx)
    st = Strategy(dp=2, pp=1, stage_of=[0] * 7, actions=["keep", "swap", "swap", "recompute"] + ["keep"] * 3,
                  microbatches=1)
    e, _ = ev.evaluate(st)
    assert e.fits and e.step_time_s > ex.best_eval.step_time_s * 1.01
    assert polish(st, e, ev, ctx, True)[1].step_time_s == e.step_time_s  # single flips: stuck
    got = polish(st, e, ev, ctx, True, jumps=True)
    assert got[1].fits and got[1].step_time_s <= ex.best_eval.step_time_s * (1 + 1e-9)
