"""Property tests of the simulator over random graphs and strategies (plain seed loops)."""
from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from memflow.cluster import Cluster, Link
from memflow.devices import DeviceSpec
from memflow.graph.record import KIND_ACTIVATION, KIND_GRAD, KIND_INPUT_GRAD, Buffer, Node, TaskGraph, replay
from memflow.kinds import GPIPE, KEEP, MIN_SWAP_BYTES, ONE_F_ONE_B, PREFETCH_DEPTHS, RECOMPUTE, SELECTIVE, SWAP
from memflow.strategy import ACTIONS, Strategy

#: the sharding levels the simulator models (random strategies draw from these)
SHARD_LEVELS = ("optimizer", "gradients")
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
        kw = dict(sharding=[rng.choice(SHARD_LEVELS) if rng.random() < 0.3 else "none" for _ in range(pp)],
                  optimizer_on_host=[rng.random() < 0.2 for _ in range(pp)], prefetch=rng.choice(PREFETCH_DEPTHS))
    return Strategy.from_boundaries(n, cuts, dp=dp, actions=acts, microbatches=rng.randint(1, 4),
                                    schedule=rng.choice([ONE_F_ONE_B, GPIPE]), **kw)


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
                       and st.actions[g.node_of_phase(u)] == KEEP for u in b.uses):
                return False
    return True


def _saves_own_output(g, k):
    """Node k saves for its own backward a tensor a later node also reads (a block ending in ReLU, an
    LSTM's output sequence). Recomputed, it makes that tensor again in its backward's replay (the
    original died with its readers' backwards), so recomputation can raise a peak (random graphs,
    whose transients are free numbers, find such cases). The executor's runs of ResNet and LSTM
    blocks recomputed this way are predicted within 0.4% (BENCHMARKS, fidelity)."""
    n = g.n
    return any(b.alloc_phase == k and (2 * n - 1 - k) in b.uses and any(k < u < n for u in b.uses)
               for b in g.buffers)


def _replay_beside(g, k):
    """What a recomputed node k's forward, run again when B_k starts, runs beside: the bytes alive
    then that B_k frees (its inputs, its output's gradient), but those k's own forward made."""
    bk = g.bwd_phase(k)
    return sum(b.nbytes for b in g.buffers
               if b.free_phase == bk and b.alloc_phase < bk and b.alloc_phase != k and b.kind != KIND_GRAD)


def _replay_outgrows_backward(g, k):
    """Recomputing node k raises B_k: its forward, run again beside :func:`_replay_beside`, holds
    more than B_k's own transient (a GRU stage's first node, measured: its forward keeps per-step
    gates its backward has not)."""
    return g.nodes[k].fwd_transient_bytes + _replay_beside(g, k) > g.nodes[k].bwd_transient_bytes


def test_recompute_with_kept_inputs_never_raises_peak():
    checked = 0
    for seed in SEEDS:
        rng = random.Random(seed)
        g = random_graph(rng.randint(2, 10), seed)
        n_dev = rng.choice([1, 2, 4])
        sim = Simulator(g, cluster(n_dev))
        for _ in range(5):
            st = random_strategy(rng, g.n, n_dev, actions=(KEEP, RECOMPUTE, SWAP))
            cand = [k for k in range(g.n) if st.actions[k] != RECOMPUTE and _inputs_kept(g, k, st)
                    and not _saves_own_output(g, k) and not _replay_outgrows_backward(g, k)]
            if not cand:
                continue
            k = rng.choice(cand)
            acts = list(st.actions)
            acts[k] = RECOMPUTE
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
        st = random_strategy(rng, g.n, n_dev, actions=(KEEP, RECOMPUTE))
        st = st.copy(optimizer_on_host=[False] * st.pp)
        acts = [(SWAP if a == KEEP and rng.random() < 0.6 else a) for a in st.actions]
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
        st = random_strategy(rng, g.n, n_dev, options=False).copy(schedule=GPIPE)
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
    """The search's evaluation (cached stages, per-shape constants, unrolled schedule timing, memo)
    agrees with the detailed one (every stage evaluated afresh with its split, the schedule recorded
    op by op) on random strategies, on toy GPU clusters, GPU presets and CPU clusters (where swap
    copies back on demand instead of prefetching one node ahead)."""
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
                assert fast.step_time_s == full.step_time_s, (seed, cl.name)
                assert max(full.end_s) == pytest.approx(full.step_time_s, rel=1e-12), (seed, cl.name)


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
                acts = rng.choice([ACTIONS, (KEEP, SWAP), (SWAP,)])
                r = sim.evaluate(random_strategy(rng, g.n, n_dev, actions=acts), detail=True)
                for d in range(n_dev):
                    assert r.memory_curve[d][1].max() == r.peak_bytes[d], (seed, cl.name, d)


def _varied_chain(rng: random.Random, n: int) -> TaskGraph:
    """A chain like :func:`chain_graph` with every size and transient drawn per node: node k makes
    ``out_k`` (read by F_{k+1}, which saves it: freed by B_{k+1}; the last node's by its own B),
    ``saved_k`` (freed by B_k), its gradient (kept past the step) and, for k > 0, ``dx_k`` (read
    and freed by B_{k-1})."""
    nodes, bufs = [], []
    for k in range(n):
        p = rng.randrange(0, 5000)
        nodes.append(Node(index=k, name=f"c{k}", module_path=f"c.{k}", param_bytes=p, grad_bytes=p,
                          optimizer_bytes=2 * p, fwd_time_s=rng.uniform(1e-4, 1e-3), bwd_time_s=rng.uniform(1e-4, 2e-3),
                          fwd_transient_bytes=rng.randrange(0, 9000), bwd_transient_bytes=rng.randrange(0, 9000)))
        F, B = k, 2 * n - 1 - k
        if k < n - 1:
            bufs.append(Buffer(rng.randrange(1, 4000), F, B - 1, KIND_ACTIVATION, [k + 1, B - 1]))
        else:
            bufs.append(Buffer(rng.randrange(1, 4000), F, B, KIND_ACTIVATION, [B]))
        bufs.append(Buffer(rng.randrange(0, 6000), F, B, KIND_ACTIVATION, [B]))
        if p:
            bufs.append(Buffer(p, B, 2 * n + 1, KIND_GRAD, [2 * n]))
        if k > 0:
            bufs.append(Buffer(rng.randrange(1, 4000), B, B + 1, KIND_INPUT_GRAD, [B + 1]))
    for nd in nodes:  # under selective: held bytes and backward transient, traced or not (-1)
        nd.saved_bytes = sum(b.nbytes for b in bufs if b.alloc_phase == nd.index and b.free_phase == 2 * n - 1 - nd.index)
        if rng.random() < 0.7:
            nd.sel_saved_bytes = rng.randrange(0, 5000)
            nd.sel_bwd_transient_bytes = rng.randrange(0, 12000)
    return TaskGraph(model_name="varied-chain", batch_size=1, dtype="fp32", nodes=nodes, buffers=bufs,
                     opt_transient_bytes=rng.randrange(0, 20000))


def _chain_oracle(g: TaskGraph, acts: list, pd: int = 1) -> list:
    """Bytes above the model state in each phase of one step of the chain ``g`` on one device
    under ``acts``, with swap copies that take no time (a GPU prefetching ``pd`` nodes ahead), by the
    rules: a buffer is on the device in phase p if made before p and freed after it, except that
    a recomputed node's ``saved_k`` is dropped after its forward (and made again in its backward,
    whose transient becomes the larger of its forward's, run beside :func:`_replay_beside`, and
    its backward's), and the buffers a
    swapped node saves (its ``saved_k``, its input ``out_{k-1}``) are off the device from the end
    of their forward uses until the backward of node k + pd starts (or the backward's first, the
    last node's, where k + pd is past it; the last node's backward follows its forward at once:
    nothing to move), but those under ``MIN_SWAP_BYTES``, which the pack hook
    leaves on the device. A selective node is a recomputed one that holds its
    ``sel_saved_bytes`` (untraced: its ``saved_bytes``) from the end of its forward to its backward,
    whose transient is its traced ``sel_bwd_transient_bytes`` (untraced: a recomputed one's)."""
    n = g.n
    per = [0] * (2 * n + 1)
    for buf in g.buffers:
        live = set(range(buf.alloc_phase + 1, min(buf.free_phase, 2 * n + 1)))
        k = 2 * n - 1 - buf.free_phase  # the node whose backward frees it (saved it)
        if buf.kind == KIND_ACTIVATION and 0 <= k < n:
            made_by_k = buf.alloc_phase == k
            if acts[k] in (RECOMPUTE, SELECTIVE) and made_by_k:
                live = set()
            elif acts[k] == SWAP and k < n - 1 and buf.nbytes >= MIN_SWAP_BYTES:  # (smaller: stays)
                live -= set(range(k + 1, 2 * n - 1 - min(k + pd, n - 1)))  # F_{k+1} .. up to B_{k+pd}
        for p in live:
            per[p] += buf.nbytes
    for k, nd in enumerate(g.nodes):
        per[k] += nd.fwd_transient_bytes
        bwd = nd.bwd_transient_bytes
        if acts[k] in (RECOMPUTE, SELECTIVE):
            bwd = max(bwd, nd.fwd_transient_bytes + _replay_beside(g, k))
        if acts[k] == SELECTIVE:
            if nd.sel_bwd_transient_bytes >= 0:
                bwd = nd.sel_bwd_transient_bytes
            for p in range(k + 1, 2 * n - 1 - k):
                per[p] += nd.sel_saved_bytes if nd.sel_saved_bytes >= 0 else nd.saved_bytes
        per[2 * n - 1 - k] += bwd
    per[2 * n] += g.opt_transient_bytes
    return per


def test_single_stage_phases_equal_a_hand_written_liveness():
    """On one device, every phase's bytes and the peak equal :func:`_chain_oracle`'s for random
    varied chains and every mix of keep / recompute / swap / selective."""
    dev = DeviceSpec(name="toy", kind="gpu", memory_bytes=1 << 30, peak_flops={"fp32": 1e13}, mem_bandwidth=9e11)
    cl = Cluster("toy", 1, 1, dev, Link(1e12, 0.0), Link(1e12, 0.0), Link(math.inf, 0.0), False, 1 << 40)
    checked = 0
    for seed in SEEDS:
        rng = random.Random(seed)
        g = _varied_chain(rng, rng.randint(1, 7))
        n = g.n
        sim = Simulator(g, cl)
        state = g.state_bytes
        for _ in range(8):
            acts = [rng.choice(ACTIONS) for _ in range(n)]
            pd = rng.choice(PREFETCH_DEPTHS)
            want = _chain_oracle(g, acts, pd)
            ev = sim.stage_eval(0, n, acts, shard=False, opt_host=False, dp=1, host_bw=math.inf, detail=True,
                                prefetch=pd)
            got = [ev.carried[p] + ev.trans[p] + ev.step[p] for p in range(2 * n + 1)]
            assert got == want, (seed, acts, pd)
            assert ev.base == state
            st = Strategy.from_boundaries(n, [], dp=1, actions=acts, prefetch=pd)
            assert sim.evaluate(st).peak_bytes == [state + max(want)], (seed, acts, pd)
            checked += 1
        assert sim.evaluate(Strategy.single(n)).peak_bytes[0] == replay(g).peak_bytes
    assert checked == 8 * len(SEEDS)


def test_stage_detail_adds_only_the_split():
    """A stage evaluated with ``detail`` has the same figures as without; its per-phase split adds
    up to its peaks (F half, B half, with and without the per-step buffers)."""
    fields = ("fwd_s", "bwd_s", "bwd_compute_s", "stall_s", "bwd_node_end", "host_s", "swap_bytes", "base", "R",
              "maxF0", "maxB0", "maxF", "maxB", "argF0", "argB0", "argF", "argB", "S_fwd", "S_after", "opt_mem",
              "sync1", "syncN", "ranks")
    for seed in SEEDS:
        rng = random.Random(seed)
        g = random_graph(rng.randint(1, 10), seed)
        if seed % 2:  # swapped nodes' CPU times measured (copies inline)
            for nd in g.nodes:
                nd.cpu_swap_fwd_time_s = nd.fwd_time_s * (1 + rng.random())
                nd.cpu_swap_bwd_time_s = nd.bwd_time_s * (1 + rng.random())
        cl = rng.choice([Cluster.load("cpu-2"), cluster(2, host_bw=rng.choice([1e9, 1e10, math.inf]))])
        sim = Simulator(g, cl)
        for _ in range(6):
            a = rng.randrange(g.n)
            b = rng.randrange(a + 1, g.n + 1)
            m = b - a
            acts = tuple(rng.choice(ACTIONS) for _ in range(m))
            kw = dict(shard=rng.random() < 0.5, opt_host=rng.random() < 0.3, dp=rng.choice([1, 2]),
                      host_bw=cl.host_link.bandwidth)
            fast = sim.stage_eval(a, b, acts, **kw)
            full = sim.stage_eval(a, b, acts, detail=True, **kw)
            for f in fields:
                assert getattr(fast, f) == getattr(full, f), (seed, f)
            v = [full.carried[p] + full.trans[p] for p in range(2 * m)]
            v0 = [v[p] + full.step[p] for p in range(2 * m)]
            assert (full.maxF, full.maxF0) == (max(v[:m]), max(v0[:m])), seed
            assert (full.maxB, full.maxB0) == (max(v[m:]), max(v0[m:])), seed
            assert full.opt_mem == full.step[2 * m] + full.trans[2 * m]
            assert all(0 <= full.swap_live[p] <= full.carried[p] for p in range(2 * m + 1)), seed


def test_cpu_swap_takes_the_measured_swapped_times():
    """On cpu-N a swapped node costs its measured swapped forward and backward (the executor's
    pack and unpack hooks copy inline): the step grows by exactly their difference from the
    kept times, with no separate copy stalls; without them the copies cost bytes / bandwidth."""
    cl = Cluster.load("cpu-1")
    for seed in range(10):
        rng = random.Random(seed)
        g = random_graph(rng.randint(2, 8), seed)
        n = g.n
        keep = Strategy.from_boundaries(n, [], dp=1, actions=[KEEP] * n, microbatches=1)
        acts = [rng.choice([KEEP, SWAP]) for _ in range(n)]
        swap = Strategy.from_boundaries(n, [], dp=1, actions=acts, microbatches=1)
        for nd in g.nodes:
            nd.cpu_swap_fwd_time_s = nd.fwd_time_s * (1 + rng.random())
            nd.cpu_swap_bwd_time_s = nd.bwd_time_s * (1 + rng.random())
        t_keep = Simulator(g, cl).evaluate(keep).step_time_s
        r = Simulator(g, cl).evaluate(swap, detail=True)
        extra = sum(nd.cpu_swap_fwd_time_s - nd.fwd_time_s + nd.cpu_swap_bwd_time_s - nd.bwd_time_s
                    for nd, a in zip(g.nodes, acts) if a == SWAP)
        assert r.step_time_s == pytest.approx(t_keep + extra, rel=1e-9, abs=1e-12), seed
        assert Simulator(g, cl).evaluate(swap).step_time_s == pytest.approx(r.step_time_s, rel=1e-9), seed
