"""Property tests of the simulator over random graphs and strategies (plain seed loops)."""
from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from memflow.cluster import Cluster, Link
from memflow.devices import DeviceSpec
from memflow.graph.record import replay
from memflow.strategy import ACTIONS, Strategy
from memflow.simulator import Simulator, random_graph

SEEDS = range(40)
PRESETS = ("cpu-2", "cpu-4", "v100-4-pcie", "a100-8-nvlink")


def cluster(n_dev, *, host_bw=12e9, host_lat=1e-5, lat=1e-5, shared=True, per_node=None) -> Cluster:
    dev = DeviceSpec(name="toy", kind="gpu", memory_bytes=16 << 30, peak_flops={"fp32": 1e13}, mem_bandwidth=9e11)
    per = per_node or n_dev
    return Cluster("toy", n_dev // per, per, dev, Link(100e9, lat), Link(10e9, lat), Link(host_bw, host_lat),
                   shared, 1 << 40)


def random_strategy(rng: random.Random, n: int, n_dev: int, *, actions=ACTIONS, options=True) -> Strategy:
    facs = [(d, n_dev // d) for d in range(1, n_dev + 1) if n_dev % d == 0 and n_dev // d <= n]
    dp, pp = rng.choice(facs)
    cuts = sorted(rng.sample(range(1, n), pp - 1))
    acts = [rng.choice(actions) for _ in range(n)]
    kw = {}
    if options:
        kw = dict(shard_state=[rng.random() < 0.3 for _ in range(pp)],
                  optimizer_on_host=[rng.random() < 0.2 for _ in range(pp)])
    return Strategy.from_boundaries(n, cuts, dp=dp, actions=acts, microbatches=rng.randint(1, 4),
                                    schedule=rng.choice(["1f1b", "gpipe"]), **kw)


def test_single_device_plain_equals_replay():
    for seed in SEEDS:
        g = random_graph(random.Random(seed).randint(1, 12), seed)
        r = Simulator(g, cluster(1)).evaluate(Strategy.single(g.n), detail=True)
        assert r.peak_bytes[0] == replay(g).peak_bytes, seed


def _inputs_kept(g, k, st) -> bool:
    """Every buffer node k's forward reads (made before F_k) is read again on k's stage
    at B_k or later by a node that keeps it (so that stage keeps it on the device for
    backward anyway; a swapped node's saved tensors go to host, and a recomputed node's
    checkpoint drops what it saves and makes it again in its backward)."""
    bk = g.bwd_phase(k)
    for b in g.buffers:
        if k in b.uses and b.alloc_phase < k:
            if not any(bk <= u < 2 * g.n and st.stage_of[g.node_of_phase(u)] == st.stage_of[k]
                       and st.actions[g.node_of_phase(u)] == "keep" for u in b.uses):
                return False
    return True


def _saves_own_output(g, k):
    """Node k saves for its own backward a tensor a later node also reads (e.g. a block ending in
    ReLU). Recomputing such a node re-makes that output in its backward while the original is
    still held by its reader, so recomputation can raise the peak: measured on the ResNet
    example, predicted to the byte since."""
    n = g.n
    return any(b.alloc_phase == k and (2 * n - 1 - k) in b.uses and any(k < u < n for u in b.uses)
               for b in g.buffers)


def test_recompute_with_kept_inputs_never_raises_peak():
    checked = 0
    for seed in SEEDS:
        rng = random.Random(seed)
        g = random_graph(rng.randint(2, 10), seed)
        n_dev = rng.choice([1, 2, 4])
        sim = Simulator(g, cluster(n_dev))
        for _ in range(5):
            st = random_strategy(rng, g.n, n_dev, actions=("keep", "recompute", "swap"))
            cand = [k for k in range(g.n) if st.actions[k] != "recompute" and _inputs_kept(g, k, st)
                    and not _saves_own_output(g, k)]
            if not cand:
                continue
            k = rng.choice(cand)
            acts = list(st.actions)
            acts[k] = "recompute"
            before = sim.evaluate(st).peak_bytes
            after = sim.evaluate(st.copy(actions=acts)).peak_bytes
            assert all(a <= b for a, b in zip(after, before)), (seed, k, before, after)
            checked += 1
    assert checked > 50


def test_free_swap_costs_no_time():
    for seed in SEEDS:
        rng = random.Random(seed)
        g = random_graph(rng.randint(2, 10), seed)
        n_dev = rng.choice([1, 2, 4])
        sim = Simulator(g, cluster(n_dev, host_bw=math.inf, host_lat=0.0))
        st = random_strategy(rng, g.n, n_dev, actions=("keep", "recompute"))
        st = st.copy(optimizer_on_host=[False] * st.pp)
        acts = [("swap" if a == "keep" and rng.random() < 0.6 else a) for a in st.actions]
        t0 = sim.evaluate(st).step_time_s
        t1 = sim.evaluate(st.copy(actions=acts)).step_time_s
        assert t1 == pytest.approx(t0, rel=1e-12, abs=1e-15), seed
        # and swapping frees memory: never more than keeping
        p0, p1 = sim.evaluate(st).peak_bytes, sim.evaluate(st.copy(actions=acts)).peak_bytes
        assert all(b <= a for a, b in zip(p0, p1)), seed


def test_peak_at_least_model_state():
    for seed in SEEDS:
        rng = random.Random(seed)
        g = random_graph(rng.randint(2, 10), seed)
        n_dev = rng.choice([1, 2, 4])
        sim = Simulator(g, cluster(n_dev))
        st = random_strategy(rng, g.n, n_dev)
        r = sim.evaluate(st, detail=True)
        for d in range(n_dev):
            b = r.breakdown[d]
            assert r.peak_bytes[d] >= b["params"] + b["optimizer"], seed
            assert sum(v for key, v in b.items() if key != "phase") == r.peak_bytes[d], seed


def test_gpipe_bubble_fraction_never_grows_with_microbatches():
    for seed in SEEDS:
        rng = random.Random(seed)
        g = random_graph(rng.randint(3, 10), seed)
        n_dev = rng.choice([2, 4])
        sim = Simulator(g, cluster(n_dev, lat=0.0))
        st = random_strategy(rng, g.n, n_dev, options=False).copy(schedule="gpipe")
        fracs = [sim.evaluate(st.copy(microbatches=m), detail=True).bubble_fraction for m in range(1, 9)]
        for a, b in zip(fracs, fracs[1:]):
            assert b <= a + 1e-12, (seed, fracs)


def test_delta_equals_full():
    for seed in SEEDS:
        rng = random.Random(seed)
        g = random_graph(rng.randint(2, 12), seed)
        n_dev = rng.choice([1, 2, 4])
        cl = cluster(n_dev, per_node=rng.choice([1, n_dev]))
        sim = Simulator(g, cl)
        st = random_strategy(rng, g.n, n_dev)
        stages = sim.stages(st)
        for _ in range(8):
            acts = list(st.actions)
            stage_of = list(st.stage_of)
            if rng.random() < 0.7 or st.pp == 1:
                k = rng.randrange(g.n)
                acts[k] = rng.choice([a for a in ACTIONS if a != acts[k]])
            else:  # move one boundary by one node where the stage stays non-empty
                cuts = st.boundaries()
                i = rng.randrange(len(cuts))
                lo = cuts[i - 1] + 1 if i > 0 else 1
                hi = cuts[i + 1] - 1 if i + 1 < len(cuts) else g.n - 1
                cuts[i] = min(hi, max(lo, cuts[i] + rng.choice([-1, 1])))
                stage_of = Strategy.from_boundaries(g.n, cuts, dp=st.dp).stage_of
            new = st.copy(actions=acts, stage_of=stage_of)
            got, stages = sim.evaluate_delta(st, new, stages)
            want = Simulator(g, cl).evaluate(new)
            assert got.step_time_s == want.step_time_s and got.peak_bytes == want.peak_bytes, seed
            assert got.fits == want.fits
            st = new


def test_evaluate_equals_detail():
    """The search's evaluation (fast stage path, per-shape constants, unrolled schedule timing,
    memo) agrees with the detailed one (full stage path, the schedule loop) on random strategies,
    on toy GPU clusters, GPU presets and CPU clusters (where swap copies back on demand instead of
    prefetching one node ahead)."""
    presets = [Cluster.load(name) for name in PRESETS]
    for seed in SEEDS:
        rng = random.Random(seed)
        g = random_graph(rng.randint(1, 12), seed)
        n_dev = rng.choice([1, 2, 4, 8])
        toy = cluster(n_dev, host_bw=rng.choice([12e9, 1e9]), shared=rng.random() < 0.5,
                      per_node=rng.choice([1, 2, n_dev]) if n_dev % 2 == 0 else n_dev)
        for cl in [toy, *presets]:
            sim = Simulator(g, cl)
            for _ in range(4):
                st = random_strategy(rng, g.n, cl.num_devices)
                fast, full = sim.evaluate(st), sim.evaluate(st, detail=True)
                assert fast.peak_bytes == full.peak_bytes and fast.fits == full.fits, (seed, cl.name)
                assert fast.step_time_s == pytest.approx(full.step_time_s, rel=1e-12), (seed, cl.name)


def test_memory_curve_peaks_at_reported_peak():
    """Every device's memory curve (the plot's and the Chrome trace's) reaches its reported peak
    and never exceeds it: CPU and GPU swap models, every schedule and action mix, backward
    transients that do or do not dominate the forward ones."""
    cpus = {n: Cluster.load(f"cpu-{n}") for n in (1, 2, 4)}
    for seed in SEEDS:
        rng = random.Random(seed)
        g = random_graph(rng.randint(1, 12), seed, bwd_dominates=rng.random() < 0.5)
        g = replace(g, input_bytes=g.input_bytes * rng.choice([1, 16]))  # each in-flight micro-batch holds its own
        n_dev = rng.choice([1, 2, 4])
        for cl in (cpus[n_dev], cluster(n_dev, host_bw=rng.choice([12e9, 1e8]))):
            sim = Simulator(g, cl)
            for _ in range(6):
                acts = rng.choice([ACTIONS, ("keep", "swap"), ("swap",)])
                r = sim.evaluate(random_strategy(rng, g.n, n_dev, actions=acts), detail=True)
                for d in range(n_dev):
                    assert r.memory_curve[d][1].max() == r.peak_bytes[d], (seed, cl.name, d)


def test_fast_stage_path_equals_full_path():
    from memflow.simulator.layout import build_layout
    from memflow.simulator.stage import eval_stage

    fields = ("fwd_s", "bwd_s", "stall_s", "host_s", "swap_bytes", "base", "R", "maxF0", "maxB0", "maxF", "maxB",
              "S_fwd", "S_after", "opt_mem", "bwd_node_end")
    for seed in SEEDS:
        rng = random.Random(seed)
        g = random_graph(rng.randint(1, 10), seed)
        if seed % 2:  # swapped nodes' CPU times measured (copies inline)
            for nd in g.nodes:
                nd.cpu_swap_fwd_time_s = nd.fwd_time_s * (1 + rng.random())
                nd.cpu_swap_bwd_time_s = nd.bwd_time_s * (1 + rng.random())
        for _ in range(6):
            a = rng.randrange(g.n)
            b = rng.randrange(a + 1, g.n + 1)
            L = build_layout(g, a, b)
            L.prefetch_ahead = rng.random() < 0.5  # GPU: one node ahead; CPU: on demand
            acts = tuple(rng.choice(ACTIONS) for _ in range(b - a))
            kw = dict(dp=rng.choice([1, 2, 4]), shard=rng.random() < 0.5, opt_host=rng.random() < 0.3,
                      input_bytes=123, opt_trans=456, host_bw=rng.choice([1e9, 1e10, math.inf]), host_lat=1e-5)
            fast = eval_stage(L, acts, **kw)
            full = eval_stage(L, acts, detail=True, **kw)
            for f in fields:
                assert getattr(fast, f) == pytest.approx(getattr(full, f)), (seed, f)


def test_cpu_swap_takes_the_measured_swapped_times():
    """On cpu-N a swapped node costs its measured swapped forward and backward (the executor's
    pack and unpack hooks copy inline): the step grows by exactly their difference from the
    kept times, with no separate copy stalls; without them the copies cost bytes / bandwidth."""
    cl = Cluster.load("cpu-1")
    for seed in range(10):
        rng = random.Random(seed)
        g = random_graph(rng.randint(2, 8), seed)
        n = g.n
        keep = Strategy.from_boundaries(n, [], dp=1, actions=["keep"] * n, microbatches=1)
        acts = [rng.choice(["keep", "swap"]) for _ in range(n)]
        swap = Strategy.from_boundaries(n, [], dp=1, actions=acts, microbatches=1)
        for nd in g.nodes:
            nd.cpu_swap_fwd_time_s = nd.fwd_time_s * (1 + rng.random())
            nd.cpu_swap_bwd_time_s = nd.bwd_time_s * (1 + rng.random())
        t_keep = Simulator(g, cl).evaluate(keep).step_time_s
        r = Simulator(g, cl).evaluate(swap, detail=True)
        extra = sum(nd.cpu_swap_fwd_time_s - nd.fwd_time_s + nd.cpu_swap_bwd_time_s - nd.bwd_time_s
                    for nd, a in zip(g.nodes, acts) if a == "swap")
        assert r.step_time_s == pytest.approx(t_keep + extra, rel=1e-9, abs=1e-12), seed
        assert Simulator(g, cl).evaluate(swap).step_time_s == pytest.approx(r.step_time_s, rel=1e-9), seed
