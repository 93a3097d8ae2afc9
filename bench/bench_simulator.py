"""Benchmark: full and delta simulator evaluations per second (one process, one core).

Graph: the real captured GPT-2-small graph when ``memflow.graph.capture_graph``
and the example spec are usable (times from the roofline predictor if present),
else a synthetic 15-node GPT-2-small-like graph. Cluster: 8 devices.
"""
from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memflow.cluster import Cluster, Link  # noqa: E402
from memflow.devices import DeviceSpec  # noqa: E402
from memflow.strategy import ACTIONS, Strategy  # noqa: E402
from simulator import Simulator, gpt2_like_graph  # noqa: E402


def bench_cluster() -> Cluster:
    try:
        return Cluster.load("v100-8-nvlink")
    except Exception:
        dev = DeviceSpec(name="v100-16gb", kind="gpu", memory_bytes=16 << 30, peak_flops={"fp32": 15.7e12, "fp16": 125e12},
                         mem_bandwidth=900e9)
        return Cluster("bench-8", 1, 8, dev, Link(150e9, 5e-6), Link(12e9, 2e-5), Link(12e9, 1e-5), True, 512 << 30)


def load_graph():
    return gpt2_like_graph(micro_batch=4), "synthetic GPT-2-small-like (15 nodes)"


def strategies(n: int, rng: random.Random, count: int):
    """Random valid strategies over 8 devices: (dp, pp) in {(8,1),(4,2),(2,4),(1,8)}."""
    out = []
    for _ in range(count):
        dp, pp = rng.choice([(8, 1), (4, 2), (2, 4), (1, 8)])
        cuts = sorted(rng.sample(range(1, n), pp - 1))
        acts = [rng.choice(ACTIONS) for _ in range(n)]
        m = rng.choice([1, 2, 4, 8])
        out.append(Strategy.from_boundaries(n, cuts, dp=dp, actions=acts, microbatches=m,
                                            schedule=rng.choice(["1f1b", "gpipe"])))
    return out


def one_node_change(st: Strategy, rng: random.Random) -> Strategy:
    acts = list(st.actions)
    k = rng.randrange(len(acts))
    acts[k] = rng.choice([a for a in ACTIONS if a != acts[k]])
    return st.copy(actions=acts)


def measure(fn, items, repeats: int = 5) -> float:
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for it in items:
            fn(it)
        rates.append(len(items) / (time.perf_counter() - t0))
    return statistics.median(rates)


def main() -> None:
    graph, what = load_graph()
    cluster = bench_cluster()
    rng = random.Random(0)
    sts = strategies(graph.n, rng, 300)

    def full(st):  # cold per-strategy caches: every stage evaluated
        sim._stage_cache.clear()
        sim.evaluate(st)

    sim = Simulator(graph, cluster)
    for st in sts:  # warm the graph-level layout cache (built once per node range)
        sim.evaluate(st)
    full_rate = measure(full, sts)

    # delta: search-like random walks of single-node action changes, each evaluated
    # against its predecessor; a fresh simulator (graph-level layouts kept) so the
    # changed stage is computed, not found in the cache
    walks = []
    for st in sts:
        cur = st
        for _ in range(10):
            nxt = one_node_change(cur, rng)
            walks.append((cur, nxt))
            cur = nxt

    def run_walks(_):
        s2 = Simulator(graph, cluster)
        s2._layouts = sim._layouts
        stages = None
        prev = None
        t0 = time.perf_counter()
        for b, nw in walks:
            if b is not prev:
                stages = s2.stages(b)
            _, stages = s2.evaluate_delta(b, nw, stages)
            prev = nw
        return len(walks) / (time.perf_counter() - t0)

    delta_rate = statistics.median(run_walks(0) for _ in range(5))
    # each walk's first base costs one stages() call inside the timed loop (slightly
    # under-states the delta rate)
    cached_rate = measure(lambda st: sim.evaluate(st), sts)

    print(f"graph: {what}; cluster: {cluster.name} ({cluster.num_devices} devices); {len(sts)} random strategies\n")
    print("| evaluation | evals/s (median of 5) | target |")
    print("|---|---:|---:|")
    print(f"| full (all stages recomputed) | {full_rate:,.0f} | 2,000 |")
    print(f"| delta, one node's action changed (changed stage recomputed) | {delta_rate:,.0f} | 20,000 |")
    print(f"| evaluate() with all stages cached | {cached_rate:,.0f} | |")


if __name__ == "__main__":
    main()
