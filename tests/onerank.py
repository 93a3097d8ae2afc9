"""A planned run beside its prediction: the swap tests' one-rank step, and any strategy's run on its ranks."""
from __future__ import annotations

from memflow.cluster import Cluster
from memflow.executor import RunConfig, run_plan
from memflow.strategy import Strategy
from simulator.core import Simulator

__all__ = ["predicted_run", "predicted_ranks", "phase_where", "stage_phases", "two_stage_phases", "one_device_phases"]


def predicted_run(model_file, graph, strategy: Strategy, batch: int = 8, cluster: str = "cpu-1"):
    """``(prediction, the run's one rank)`` of ``strategy`` for ``model_file`` (profiled as ``graph``) on
    ``cluster``: the simulator's detailed evaluation, and two steps after a warm-up, uncapped."""
    pred = Simulator(graph, Cluster.load(cluster)).evaluate(strategy, detail=True)
    cfg = RunConfig(model_file=str(model_file), batch_size=batch, strategy=strategy, steps=2, warmup=1, device="cpu",
                    node_names=[nd.name for nd in graph.nodes], capacity_bytes=None,
                    predicted={"peak_bytes": pred.peak_bytes, "step_time_s": pred.end_s})
    (r,) = run_plan(cfg, nproc=1, timeout_s=240).ranks
    return pred, r


def predicted_ranks(model_file, graph, strategy: Strategy, batch: int = 8, cluster: str = "cpu-2", steps: int = 3,
                    warmup: int = 1):
    """``(prediction, the run's report)`` of ``strategy`` for ``model_file`` (profiled as ``graph``) on
    ``cluster``, one process per device, uncapped; each rank reports its predicted peak beside its own."""
    pred = Simulator(graph, Cluster.load(cluster)).evaluate(strategy, detail=True)
    cfg = RunConfig(model_file=str(model_file), batch_size=batch, strategy=strategy, steps=steps, warmup=warmup,
                    device="cpu", node_names=[nd.name for nd in graph.nodes], capacity_bytes=None,
                    predicted={"peak_bytes": pred.peak_bytes, "step_time_s": pred.end_s})
    return pred, run_plan(cfg, nproc=strategy.num_devices, timeout_s=300)


def phase_where(graph, p: int, mb: int = 0) -> str:
    """The run's name (a rank's ``phase_peaks`` key) of one-device phase ``p`` of ``graph``'s step
    (forwards 0 .. n-1, then backwards), for micro-batch ``mb``."""
    n = graph.n
    k = p if p < n else 2 * n - 1 - p
    return f"{'forward' if p < n else 'backward'} of node {k} ({graph.nodes[k].name}), micro-batch {mb}"


def stage_phases(graph, report, predicted, ranges):
    """Per pipeline stage ``s`` whose node range ``ranges[s]`` is given, per local phase ``q`` (forwards, then
    backwards): ``(s, q, where, predicted[s][q], the run's peak there)``, the run's taken with the stage's send
    or receive beside the phase (``predicted``: :meth:`simulator.core.Simulator.phase_bytes`)."""
    for s, (lo, hi) in enumerate(ranges):
        r = report.ranks[s]
        m = hi - lo
        for q in range(2 * m):
            k = lo + q if q < m else hi - 1 - (q - m)
            where = phase_where(graph, k if q < m else 2 * graph.n - 1 - k)
            way = where.split(" of node ")[0]  # (the phase, and the stage's send or receive beside it)
            got = max(v for w, v in r.phase_peaks.items() if w.endswith(where[len(way):]) and way in w)
            yield s, q, where, predicted[s][q], got


LETTERS = {"K": "keep", "R": "recompute", "S": "swap", "L": "selective"}


def two_stage_phases(model_file, pattern: str, batch: int = 4):
    """``model_file`` run on two stages cut at half its nodes, one micro-batch, the nodes' actions ``pattern``'s
    letters in turn (K keep, R recompute, S swap, L selective): ``(graph, report, phases)``, ``phases`` the
    :func:`stage_phases` of both stages."""
    from memflow.planner import GraphSource, resolve_spec

    g = GraphSource(resolve_spec(str(model_file)), Cluster.load("cpu-2"))(batch)
    cut = g.n // 2
    st = Strategy(dp=1, pp=2, stage_of=[0] * cut + [1] * (g.n - cut),
                  actions=[LETTERS[pattern[i % len(pattern)]] for i in range(g.n)])
    pred = Simulator(g, Cluster.load("cpu-2")).phase_bytes(st)
    _, rep = predicted_ranks(model_file, g, st, batch=batch, steps=2)
    return g, rep, list(stage_phases(g, rep, pred, [(0, cut), (cut, g.n)]))


def one_device_phases(model_file, pattern: str, batch: int = 4):
    """``model_file`` run on one device, the nodes' actions ``pattern``'s letters in turn: ``(report's rank,
    [(where, predicted, the run's peak there)] per phase)``."""
    from memflow.planner import GraphSource, resolve_spec

    g = GraphSource(resolve_spec(str(model_file)), Cluster.load("cpu-1"))(batch)
    st = Strategy(dp=1, pp=1, stage_of=[0] * g.n, actions=[LETTERS[pattern[i % len(pattern)]] for i in range(g.n)])
    pred = Simulator(g, Cluster.load("cpu-1")).phase_bytes(st)[0]
    _, r = predicted_run(model_file, g, st, batch=batch, cluster="cpu-1")
    out = []
    for p in range(2 * g.n):
        where = phase_where(g, p)
        out.append((where, pred[p], max(v for w, v in r.phase_peaks.items() if w.endswith(where))))
    return r, out
