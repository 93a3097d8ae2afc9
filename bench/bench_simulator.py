"""Benchmark: full and delta simulator evaluations per second (one process, one core).

Graph: the real captured GPT-2-small graph when ``memflow.graph.capture_graph``
and the example spec are usable (times from the roofline predictor if present),
else a synthetic 15-node GPT-2-small-like graph. Cluster: 8 devices.
"""
from __future__ import annotations

import random
import statistics
import time
from pathlib import Path


from memflow.cluster import Cluster, Link  # noqa: E402
from memflow.devices import DeviceSpec  # noqa: E402
from memflow.strategy import ACTIONS, Strategy  # noqa: E402
from memflow.simulator import Simulator  # noqa: E402


def bench_cluster() -> Cluster:
    try:
        return Cluster.for_gpus(8, "v100-16gb")
    except Exception:
        dev = DeviceSpec(name="v100-16gb", kind="gpu", memory_bytes=16 << 30, peak_flops={"fp32": 15.7e12, "fp16": 125e12},
                         mem_bandwidth=900e9)
        return Cluster("bench-8", 1, 8, dev, Link(150e9, 5e-6), Link(12e9, 2e-5), Link(12e9, 1e-5), True, 512 << 30)


def load_graph():
    """The real captured GPT-2-small graph (batch 4 × 1024, fp32), times predicted for a V100."""
    import os

    from memflow.devices import load_device
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model

    old = os.environ.get("MEMFLOW_EXAMPLE_SCALE")
    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "full"
    try:
        spec = load_model_file(Path(__file__).resolve().parent.parent / "examples" / "gpt2.py")
        g = profile_model(spec, 4, device=load_device("v100-16gb"))
    finally:
        if old is None:
            os.environ.pop("MEMFLOW_EXAMPLE_SCALE", None)
        else:
            os.environ["MEMFLOW_EXAMPLE_SCALE"] = old
    return g, f"captured GPT-2 small ({g.n} nodes, micro-batch 4 × 1024, V100 roofline times)"


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
        sim.clear_results()
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
        s2 = sim.fresh()
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

    from .common import md_table, write_section

    body = (f"Graph: {what}; cluster: {cluster.name} ({cluster.num_devices} devices); {len(sts)} random "
            "strategies (dp × pp in 8×1, 4×2, 2×4, 1×8; random cuts, actions, micro-batches, schedules); "
            "one process.\n\n" + md_table(["evaluation", "evals/s (median of 5)", "target"], [
                ["full (every stage evaluated, per-strategy caches cold)", f"{full_rate:,.0f}", "2,000"],
                ["delta (one node's action changed; its stage re-evaluated)", f"{delta_rate:,.0f}", "20,000"],
                ["evaluate() with every stage cached", f"{cached_rate:,.0f}", ""]]))
    write_section("simulator", "Simulator speed", body)


if __name__ == "__main__":
    main()
