"""Hand-computed checks of the simulator (liveness peaks, 1F1B timing, all-reduce α–β)."""
from __future__ import annotations

import json
import math

import pytest

from memflow.cluster import Cluster, Link
from memflow.devices import DeviceSpec
from memflow.errors import StrategyError
from memflow.executor import RunConfig
from memflow.graph.record import replay
from memflow.kinds import GPIPE, KEEP, MIN_SWAP_BYTES, ONE_F_ONE_B, RECOMPUTE, SCHEDULES, SWAP
from memflow.strategy import Strategy
from memflow.units import format_bytes
from memflow.plot import plot_memory
from memflow.simulator import BUCKET_BYTES, Simulator, chain_graph, simulate

A, S, P = 100, 1000, 10  # bytes: activation, saved-for-backward, params per node
MS = 1e-3


def make_cluster(n_dev=1, *, host_bw=1e12, host_lat=0.0, intra=Link(1e12, 0.0), mem=1 << 30,
                 mem_bw=1e15, host_mem=1 << 40, shared=False, per_node=None, kind="gpu") -> Cluster:
    dev = DeviceSpec(name="toy", kind=kind, memory_bytes=mem, peak_flops={"fp32": 1e12}, mem_bandwidth=mem_bw,
                     memory_efficiency=1.0)
    per = per_node or n_dev
    return Cluster("toy", n_dev // per, per, dev, intra, Link(1e9, 1e-5), Link(host_bw, host_lat), shared, host_mem)


def toy(n=3, **kw):
    return chain_graph(n, act_bytes=A, saved_bytes=S, param_bytes=P, fwd_s=1 * MS, bwd_s=2 * MS, **kw)


def test_toy_chain_keep_peak_by_hand():
    # phases F0 F1 F2 B2 B1 B0 OPT = 0..6 ; buffers (alloc -> free):
    # out0 0->4, out1 1->3, out2 2->3, s0 0->5, s1 1->4, s2 2->3, g_k B_k->end, dx1 4->5, dx2 3->4
    carried = [0, A + S, 2 * A + 2 * S, A + 2 * S, S + P, 2 * P, 3 * P]
    trans = [A + S, A + S, A + S, 3 * A + S + P, 3 * A + S + P, A + S + P, 0]
    state = 3 * P + 6 * P  # params + Adam state (2× params)
    expected = state + max(c + t for c, t in zip(carried, trans))
    g = toy()
    assert expected == state + 4 * A + 3 * S + P  # the peak is B2
    r = simulate(g, Strategy.single(3), make_cluster())
    assert r.peak_bytes[0] == expected == replay(g).peak_bytes
    b = r.breakdown[0]
    assert sum(v for k, v in b.items() if k != "phase") == expected


def test_toy_chain_recompute_peak_by_hand():
    g = toy()
    state = 9 * P
    # recompute node 1: s1 (F1 -> B1) is no longer carried through F2, B2
    acts = [KEEP, RECOMPUTE, KEEP]
    r = simulate(g, Strategy(1, 1, [0, 0, 0], acts), make_cluster())
    assert r.peak_bytes[0] == state + 4 * A + 2 * S + P
    # node 2's saved buffer is never carried: recomputing it changes nothing
    r2 = simulate(g, Strategy(1, 1, [0, 0, 0], [KEEP, KEEP, RECOMPUTE]), make_cluster())
    assert r2.peak_bytes[0] == replay(g).peak_bytes
    # recompute costs its forward again in the backward
    r0 = simulate(g, Strategy.single(3), make_cluster())
    assert r.step_time_s == pytest.approx(r0.step_time_s + 1 * MS)


def test_recomputed_forward_runs_beside_what_its_backward_starts_with():
    """A recomputed node's forward runs again when its backward starts, beside the bytes alive
    then that the backward frees: its input (for a later stage's first node, the received
    activation, held by its checkpoint) and its output's gradient. Counting the replay above the
    carried bytes alone under-predicted a GRU stage's first node by 5.9% in execution."""
    ws = 2000  # the forward's workspace: its transient (A + S + ws) outgrows the backward's
    g = toy(ws_fwd=ws)
    g.nodes[2].fwd_transient_bytes = A + S
    st = Strategy.from_boundaries(3, [1], dp=1, actions=[KEEP, RECOMPUTE, KEEP])
    r = simulate(g, st, make_cluster(2))
    # stage 1 (nodes 1, 2): B1 starts with g2 carried, out0 (received) and dx2 alive, then runs
    # node 1's forward (A + S + ws) again
    assert r.breakdown[1]["phase"] == "B0"
    assert r.peak_bytes[1] == 2 * P + 4 * P + P + (2 * A) + (A + S + ws)


def test_recomputed_node_input_freed_by_its_forward_is_held_through_its_backward():
    """An input no backward saves (freed in the forward that reads it) is held by a recomputed
    reader's checkpoint until the end of the reader's backward, so it is live in that backward."""
    g = toy()
    for b in g.buffers:
        if (b.nbytes, b.alloc_phase, b.free_phase) == (A, 0, 4):  # out0: read by F1 only, freed there
            b.uses, b.free_phase = [1], 1
    g.nodes[1].fwd_transient_bytes = A + S + A  # out1, s1 made; out0 freed in F1
    g.nodes[1].bwd_transient_bytes = 2 * S + P + 2 * A  # a workspace S; g1, dx1 made; s1, dx2 freed
    r = simulate(g, Strategy(1, 1, [0, 0, 0], [KEEP, RECOMPUTE, KEEP]), make_cluster())
    # B1: s0 and g2 carried, out0 (held by node 1's checkpoint) beside B1's own transient
    assert r.breakdown[0]["phase"] == "B0"
    assert r.peak_bytes[0] == 9 * P + (S + P) + A + (2 * S + P + 2 * A)


def test_toy_chain_swap_peak_and_stall_by_hand():
    g = toy()
    state = 9 * P
    acts = [SWAP, KEEP, KEEP]
    # instant copies: s0 leaves after F0 and is back from B1 (prefetch when B1 starts) to B0
    r = simulate(g, Strategy(1, 1, [0, 0, 0], acts), make_cluster(host_bw=math.inf))
    # F2: 2A+S carried + A+S ; B2: A+S carried + 3A+S+P ; B1: s0 back + g2 + 3A+S+P
    assert r.peak_bytes[0] == state + max(3 * A + 2 * S, 4 * A + 2 * S + P, 3 * A + 2 * S + 2 * P)
    base = simulate(g, Strategy.single(3), make_cluster())
    assert r.step_time_s == pytest.approx(base.step_time_s)
    # copy-out takes 1.5 ms (S bytes at S/1.5ms): done during F2 (ends 3 ms), so s0 is
    # still on the device through F2 -> F2 holds 3A+3S
    bw = S / (1.5 * MS)
    r = simulate(g, Strategy(1, 1, [0, 0, 0], acts), make_cluster(host_bw=bw))
    assert r.peak_bytes[0] == state + 3 * A + 3 * S
    assert r.step_time_s == pytest.approx(base.step_time_s)  # prefetch 5 -> 6.5 ms, B0 starts at 7 ms
    # copy 3 ms: out 1 -> 4 ms, prefetch 5 -> 8 ms, B0 waits 1 ms
    r = simulate(g, Strategy(1, 1, [0, 0, 0], acts), make_cluster(host_bw=S / (3 * MS)))
    assert r.step_time_s == pytest.approx(base.step_time_s + 1 * MS)
    assert r.busy[0]["host"] == pytest.approx(6 * MS)
    assert r.host_bytes[0] == S


def test_deeper_prefetch_hides_a_long_copy_back_by_hand():
    """A GPU starts a swapped node's copy back ``prefetch`` nodes ahead of its backward: deeper, a
    copy longer than one backward no longer stalls the step, and its buffer is back that much
    earlier (the peak can grow); on the CPU the copy is made on demand and the depth changes nothing."""
    g = toy()
    state = 9 * P
    base = simulate(g, Strategy.single(3), make_cluster())
    swap0 = Strategy(1, 1, [0, 0, 0], [SWAP, KEEP, KEEP])
    # copy 3 ms: out 1 -> 4 ms (F ends at 3, B2 3-5, B1 5-7, B0 7-9)
    cl = make_cluster(host_bw=S / (3 * MS))
    # depth 1: back from B1's start, 5 -> 8 ms: B0 waits 1 ms
    assert simulate(g, swap0, cl).step_time_s == pytest.approx(base.step_time_s + 1 * MS)
    # depth 2: asked for as B2 starts (3 ms), after the copy out (4 ms): 4 -> 7 ms, B0 starts on time
    for d in (2, 3):
        assert simulate(g, swap0.copy(prefetch=d), cl).step_time_s == pytest.approx(base.step_time_s)
    # instant copies: s0 off the device from F1; depth 1 brings it back for B1, depth 2 for B2,
    # beside B2's A+S carried and its 3A+S+P transient
    cl = make_cluster(host_bw=math.inf)
    one = simulate(g, swap0, cl).peak_bytes[0]
    assert one == state + max(3 * A + 2 * S, 4 * A + 2 * S + P, 3 * A + 2 * S + 2 * P)
    assert simulate(g, swap0.copy(prefetch=2), cl).peak_bytes[0] == state + 4 * A + 3 * S + P
    cpu = make_cluster(host_bw=S / (3 * MS), kind="cpu")
    r1, r2 = simulate(g, swap0, cpu), simulate(g, swap0.copy(prefetch=2), cpu)
    assert (r1.step_time_s, r1.peak_bytes) == (r2.step_time_s, r2.peak_bytes)


def test_a_swap_whose_copy_out_is_in_flight_when_its_prefetch_is_due_is_read_where_it_is_by_hand():
    """On a GPU a swapped node whose copy to the host has not ended when its prefetch is due is not
    copied back: its backward reads the device tensor (``HostSwap.prefetch_one``), so the backward
    does not wait for the copies queued on the link, and buffers whose copies are still running stay
    on the device into the backward (the H200's swap-all GPT-2: six blocks' copies out in flight at the
    LM head's backward; a model that waited for the whole queue had them gone, 50% under there)."""
    g = toy(4)
    cl = make_cluster(host_bw=S / (3 * MS))  # each copy 3 ms
    keep, st = Strategy.single(4), Strategy(1, 1, [0] * 4, [SWAP, SWAP, SWAP, KEEP])
    # F0..F3 0-4 ms; copies out s0 1-4, s1 4-7, s2 7-10. B3 4-6: node 2's prefetch is due, its copy
    # out runs to 10 ms: held. B2 6-8: node 1's (copy out to 7): held. B1 8-10: node 0's is copied
    # back after s2's copy out, 10-13: B0 waits 3 ms, 13-15 (a model waiting for each copy out: 21)
    base = simulate(g, keep, cl)
    r = simulate(g, st, cl)
    assert r.step_time_s == pytest.approx(base.step_time_s + 3 * MS)
    assert r.busy[0]["host"] == pytest.approx(4 * 3 * MS)  # three copies out, one back
    # memory: s0 is off the device through B3 and B2 (its copy out ended at 4 ms, back from B1);
    # s2 stays through B1, where its copy out still reads it
    sim = Simulator(g, cl)
    pk, ps = sim.phase_bytes(keep)[0], sim.phase_bytes(st)[0]
    assert [a - b for a, b in zip(ps, pk)] == [0, 0, 0, 0, -S, -S, S, 0]


def test_swap_moves_the_buffers_a_node_saves_by_hand():
    """A swapped node's pack hook copies every tensor it saves, its inputs too: on the device each
    lives until its other uses are done, and is back for the node's backward (CPU: on demand); a
    tensor under ``MIN_SWAP_BYTES`` stays on the device."""
    a = 3 * A  # (300 bytes: above MIN_SWAP_BYTES, as S is; A alone is under it)
    assert A < MIN_SWAP_BYTES <= a <= S
    g = chain_graph(3, act_bytes=a, saved_bytes=S, param_bytes=P, fwd_s=1 * MS, bwd_s=2 * MS)
    state = 9 * P
    cl = make_cluster(host_bw=math.inf, kind="cpu")
    st = Strategy(1, 1, [0, 0, 0], [KEEP, SWAP, KEEP])
    # node 1 saves out0 (its input) and s1: out0 stays through F1 (which reads it), s1 leaves with
    # F1's end (F1's transient loses it); both are back in B1
    # F1: a+S carried + a ; F2: a+S + a+S ; B2: S + 3a+S+P ; B1: S+P + 3a+S+P
    r = simulate(g, st, cl)
    assert r.peak_bytes[0] == state + 3 * a + 2 * S + 2 * P
    assert g.input_bytes == 0 and r.host_bytes[0] == a + S
    # s1 also read by F2 (an output node 2 reads, as after a ReLU): held through F2
    for b in g.buffers:
        if (b.nbytes, b.alloc_phase, b.free_phase) == (S, 1, 4):
            b.uses = [2, 4]
    r = simulate(g, st, cl)
    assert r.peak_bytes[0] == state + 2 * a + 3 * S
    # out0 under MIN_SWAP_BYTES: the pack hook leaves it on the device, carried through F2 and B2 as
    # kept (B2: S + 4A+S+P, the peak); only s1 goes to the host
    g = toy()
    r = simulate(g, st, cl)
    assert r.peak_bytes[0] == state + 4 * A + 2 * S + P
    assert r.host_bytes[0] == S


def test_two_stage_1f1b_by_hand():
    alpha, beta = 0.1 * MS, A / (0.4 * MS)  # one transfer of A bytes: c = 0.5 ms
    c = alpha + A / beta
    g = chain_graph(2, act_bytes=A, saved_bytes=S, param_bytes=P, fwd_s=1 * MS, bwd_s=2 * MS)
    cl = make_cluster(2, intra=Link(beta, alpha), mem_bw=1e6)
    st = Strategy.from_boundaries(2, [1], dp=1, microbatches=4, schedule=ONE_F_ONE_B)
    r = simulate(g, st, cl)
    # stage 0: F0 F1 B0 F2 B1 F3 B2 B3 ; stage 1: F0 B0 F1 B1 F2 B2 F3 B3 (F = 1 ms, B = 2 ms)
    # op by op (ms): s1.B0 ends 4+c, s0.B0 6+2c, s1.B1 7+c, s0.B1 9+2c, s0.F3 10+2c,
    # s1.F3 11+3c, s1.B3 13+3c, s0.B2 10+4c..12+4c, s0.B3 13+4c..15+4c
    opt = (P + P + 2 * P) / 1e6  # params + grads + Adam state over memory bandwidth
    assert r.pipeline_time_s == pytest.approx(15 * MS + 4 * c)
    assert r.step_time_s == pytest.approx(15 * MS + 4 * c + opt)
    # stage 0 holds min(m, pp - s) = 2 micro-batches: the other one's s0 (S bytes) and its sent
    # output (A bytes: a sent value is held until its gradient comes back, as the executor does)
    assert r.breakdown[0]["inflight_microbatches"] == S + A
    assert r.breakdown[1]["inflight_microbatches"] == 0
    # stage 0's peak: a later backward with the other micro-batch in flight and g0 alive
    assert r.peak_bytes[0] == (P + 2 * P) + (S + A) + (A + S + P) + P
    # GPipe holds all 4
    r = simulate(g, st.copy(schedule=GPIPE), cl)
    assert r.breakdown[0]["inflight_microbatches"] == 3 * (S + A)


@pytest.mark.parametrize("sched", SCHEDULES)
def test_schedule_inflight_is_the_op_orders_most(sched):
    """memflow.schedule: every stage runs each micro-batch's forward before its backward, and
    inflight() is the most micro-batches its op order has between forward and backward."""
    from memflow.schedule import BACKWARD, FORWARD, inflight, stage_ops

    for pp in range(1, 7):
        for m in range(1, 9):
            for s in range(pp):
                ops = stage_ops(pp, s, m, sched)
                assert sorted(ops) == sorted([(FORWARD, j) for j in range(m)] + [(BACKWARD, j) for j in range(m)])
                live = most = 0
                for kind, j in ops:
                    assert kind == FORWARD or ops.index((FORWARD, j)) < ops.index((BACKWARD, j))
                    live += 1 if kind == FORWARD else -1
                    most = max(most, live)
                assert inflight(pp, s, m, sched) == most, (pp, s, m)
    with pytest.raises(ValueError, match="unknown schedule"):
        stage_ops(2, 0, 2, "zigzag")


def test_pipeline_ops_start_when_stage_and_input_are_ready():
    """run_pipeline's recorded ops follow each stage's order, start when the stage is free and
    the input has arrived (none earlier), and the untimed call (unrolled code; closed form for
    one stage) returns the same times."""
    import random

    from memflow.simulator.pipeline import run_pipeline, stage_order

    rng = random.Random(0)
    for _ in range(200):
        pp, m, sched = rng.randint(1, 6), rng.randint(1, 8), rng.choice([ONE_F_ONE_B, GPIPE])
        fwd = [rng.uniform(0, 2) for _ in range(pp)]
        bwd = [rng.uniform(0, 4) for _ in range(pp)]
        cf = [rng.choice([0.0, rng.uniform(0, 1)]) for _ in range(pp - 1)]
        cb = [rng.choice([0.0, rng.uniform(0, 1)]) for _ in range(pp - 1)]
        end, last_b, ops = run_pipeline(fwd, bwd, cf, cb, m, sched, record=True)
        done = {(s, op): t1 for s in range(pp) for op, _, t1 in ops[s]}
        for s in range(pp):
            assert [op for op, _, _ in ops[s]] == list(stage_order(pp, s, m, sched))
            free = 0.0
            for op, t0, t1 in ops[s]:
                if op >= 0:
                    ready = done[(s - 1, op)] + cf[s - 1] if s > 0 else 0.0
                else:
                    ready = done[(s + 1, op)] + cb[s] if s < pp - 1 else 0.0
                assert t0 == max(free, ready) and t1 == t0 + (fwd[s] if op >= 0 else bwd[s])
                free = t1
            assert end[s] == free and last_b[s] == ops[s][-1][2] - bwd[s]
        fast = run_pipeline(fwd, bwd, cf, cb, m, sched)
        if pp > 1:
            assert fast[:2] == (end, last_b)
        else:
            assert fast[0] == pytest.approx(end, rel=1e-12) and fast[1] == pytest.approx(last_b, rel=1e-12, abs=1e-12)


def test_data_parallel_allreduce_alpha_beta():
    alpha, beta = 1e-5, 1e9
    Pn = 10**6
    g = chain_graph(2, act_bytes=A, saved_bytes=S, param_bytes=Pn, fwd_s=1 * MS, bwd_s=2 * MS)
    cl = make_cluster(4, intra=Link(beta, alpha), mem_bw=1e18)
    dp = 4
    st = Strategy.single(2, dp=dp)
    ring = lambda nbytes: 2 * (dp - 1) / dp * nbytes / beta + 2 * (dp - 1) * alpha  # noqa: E731
    # one bucket (25 MB) starting when the backward ends at 6 ms
    r = Simulator(g, cl).evaluate(st, detail=True)
    opt = 4 * Pn / 1e18
    assert r.step_time_s == pytest.approx(6 * MS + ring(2 * Pn) + opt)
    # a bucket per node: node 1's grads reduce from 4 ms (overlapping B0), node 0's from 6 ms
    r = Simulator(g, cl, bucket_bytes=1).evaluate(st, detail=True)
    first_end = 4 * MS + ring(Pn)
    assert r.step_time_s == pytest.approx(max(6 * MS, first_end) + ring(Pn) + opt)
    assert r.busy[0]["comm"] == pytest.approx(2 * ring(Pn))
    # sharded state (ZeRO-1): the same all-reduce; each rank steps 1/dp of the state, then the
    # updated parameter shards are broadcast ((dp-1)/dp of the parameter bytes; each rank's shard is
    # one flat bucket, so dp broadcasts, a latency each)
    half = lambda nbytes: (dp - 1) / dp * nbytes / beta + dp * alpha  # noqa: E731
    st2 = Strategy(dp, 1, [0, 0], [KEEP] * 2, sharding=["optimizer"])
    r = Simulator(g, cl).evaluate(st2, detail=True)
    assert r.step_time_s == pytest.approx(6 * MS + ring(2 * Pn) + opt / dp + half(2 * Pn))
    assert r.breakdown[0]["params"] == 2 * Pn  # parameters stay whole
    plain = Simulator(g, cl).evaluate(st, detail=True)
    assert r.breakdown[0]["optimizer"] * dp == pytest.approx(plain.breakdown[0]["optimizer"], rel=1e-6)


def test_gradient_sync_bucket_copies_by_hand():
    """Data-parallel gradient sync (memflow.buckets, as the executor runs it): a bucket of several
    gradients is flattened into a new tensor that the gradients then view, so the copy lives only
    while it is made, beside the gradients; a gradient of at least the cap is reduced in place.
    Gradient-heavy plans (OPT, 0.3 of plain) ran out of memory there, predicted to fit."""
    Pb = 10**6
    g = chain_graph(3, act_bytes=A, saved_bytes=S, param_bytes=Pb, fwd_s=1 * MS, bwd_s=2 * MS)
    st = Strategy(2, 1, [0] * 3, [KEEP] * 3, optimizer_on_host=[True])
    # one bucket of the three gradients, flattened after the backward: params + grads + the copy
    r = simulate(g, st, make_cluster(2))
    assert r.peak_bytes == [9 * Pb] * 2
    b = r.breakdown[0]
    assert (b["phase"], b["params"], b["grads"], b["transient"]) == ("SYNC", 3 * Pb, 3 * Pb, 3 * Pb)
    assert sum(v for k, v in b.items() if k != "phase") == 9 * Pb
    assert max(r.memory_curve[0][1]) == 9 * Pb
    # one device: no sync; the peak is B0 (g2, g1 carried; x0's A + S and g0 made)
    plain = 3 * Pb + (2 * Pb + A + S + Pb)
    assert simulate(g, st.copy(dp=1), make_cluster(1)).peak_bytes == [plain]
    # each gradient at the cap: all-reduced in place, no copy
    assert Simulator(g, make_cluster(2), bucket_bytes=Pb).evaluate(st, detail=True).peak_bytes == [plain] * 2
    # cap 2 Pb: g2 and g1 flattened between B1 and B0 (beside what both phases hold: the smaller,
    # B1's s0, g2 carried and its 3A + S + Pb), g0 reduced in place after the backward
    r = Simulator(g, make_cluster(2), bucket_bytes=2 * Pb).evaluate(st, detail=True)
    assert r.peak_bytes == [3 * Pb + (S + Pb) + (3 * A + S + Pb) + 2 * Pb] * 2
    assert r.breakdown[0]["phase"] == "SYNC" and max(r.memory_curve[0][1]) == r.peak_bytes[0]
    # the fast evaluation agrees
    assert Simulator(g, make_cluster(2), bucket_bytes=2 * Pb).evaluate(st).peak_bytes == r.peak_bytes


def test_zero1_shards_the_optimizer_by_parameter_per_rank():
    """ZeRO-1 (``ZeroRedundancyOptimizer``) gives each parameter whole to one rank, largest first to
    the rank with the fewest elements: a rank holds its parameters' optimizer state and steps them
    (every gradient, its own temporaries). A tied model whose embedding is most of its bytes put it
    all on rank 0, 12.6% over an even share's prediction there."""
    Q = 10**6
    g = chain_graph(2, act_bytes=A, saved_bytes=S, param_bytes=Q, fwd_s=1 * MS, bwd_s=2 * MS)
    sizes = [3 * Q, Q]
    for k, nd in enumerate(g.nodes):
        nd.param_bytes = nd.grad_bytes = sizes[k]
        nd.optimizer_bytes = 2 * sizes[k]
        nd.param_names = nd.read_params = [f"w{k}"]
    g.params = {f"w{k}": [sizes[k], sizes[k], 2 * sizes[k], k] for k in range(2)}
    for b in g.buffers:
        if b.kind == "grad":  # the step's gradients, freed by the step (as traced)
            b.param, b.nbytes, b.free_phase = f"w{1 if b.alloc_phase == 2 else 0}", sizes[1 if b.alloc_phase == 2 else 0], 4
    g.opt_transient_bytes = 4 * Q + 2 * 3 * Q  # every gradient + AdamW's one-tensor temporaries (2× the largest)
    cl = make_cluster(2, kind="cpu")
    st = Strategy(2, 1, [0, 0], [KEEP] * 2, sharding=["optimizer"])
    sim = Simulator(g, cl, bucket_bytes=Q)  # (the gradients all-reduced in place: no bucket copy)
    r = sim.evaluate(st, detail=True)
    # rank 0: w0's state (6Q) and its step (4Q grads + 6Q); rank 1: w1's (2Q) and its (4Q + 2Q)
    assert r.peak_bytes == [4 * Q + 6 * Q + 4 * Q + 6 * Q, 4 * Q + 2 * Q + 4 * Q + 2 * Q]
    assert [b["optimizer"] for b in r.breakdown] == [6 * Q, 2 * Q]
    assert all(b["phase"] == "OPT" and sum(v for k, v in b.items() if k != "phase") == p
               for b, p in zip(r.breakdown, r.peak_bytes))
    assert [max(c[1]) for c in r.memory_curve] == r.peak_bytes
    assert sim.fresh().evaluate(st).peak_bytes == r.peak_bytes
    assert sim.evaluate(st.copy(sharding=["none"])).peak_bytes == [4 * Q + 8 * Q + 4 * Q + 6 * Q] * 2


def test_executor_buckets_with_the_simulators_cap():
    assert RunConfig(model_file="m.py", batch_size=1, strategy=Strategy.single(1)).bucket_cap_bytes == BUCKET_BYTES


def test_invalid_strategies_show_arithmetic():
    g = toy()
    sim = Simulator(g, make_cluster(4))
    with pytest.raises(StrategyError, match=r"dp 2 × pp 3 = 6 devices, cluster has 4"):
        sim.evaluate(Strategy(2, 3, [0, 1, 2], [KEEP] * 3))
    sim = Simulator(g, make_cluster(3))
    with pytest.raises(StrategyError, match=r"node 2 jumps from stage 0 to 2"):
        sim.evaluate(Strategy(1, 3, [0, 0, 2], [KEEP] * 3, sharding=["none"] * 3,
                              optimizer_on_host=[False] * 3))
    sim = Simulator(g, make_cluster(4))
    with pytest.raises(StrategyError, match=r"pp 4 stages > 3 graph nodes"):
        sim.evaluate(Strategy(1, 4, [0, 1, 2], [KEEP] * 3))
    with pytest.raises(StrategyError, match="unknown memory action"):
        sim.evaluate(Strategy(4, 1, [0, 0, 0], [KEEP, "offload", KEEP]))


def test_does_not_fit_and_binding(tmp_path):
    g = toy()
    need = replay(g).peak_bytes
    r = simulate(g, Strategy.single(3), make_cluster(mem=need - 1))
    assert not r.fits
    assert r.binding.startswith("memory: device 0 at")
    # a small device reads in the unit that tells its peak from its capacity (not "0.00/0.00 GiB")
    assert r.binding.endswith(f"at {need:,} B of {need - 1:,} B")
    r = simulate(g, Strategy.single(3), make_cluster(mem=need // 2))
    assert r.binding.endswith(f"at {format_bytes(need)} of {format_bytes(need // 2)}")
    r = simulate(g, Strategy.single(3), make_cluster(mem=need))
    assert r.fits and r.binding.startswith("compute")
    # host memory is a constraint too
    r = simulate(g, Strategy(1, 1, [0, 0, 0], [SWAP, KEEP, KEEP]), make_cluster(host_mem=S - 1))
    assert not r.fits and r.binding.startswith("host memory")


def test_exports(tmp_path):
    g = chain_graph(6, act_bytes=1 << 20, saved_bytes=4 << 20, param_bytes=1 << 20)
    st = Strategy.from_boundaries(6, [3], dp=2, microbatches=4, actions=[SWAP, RECOMPUTE] * 3)
    r = simulate(g, st, make_cluster(4, host_bw=1e9, host_lat=1e-5, intra=Link(1e10, 1e-5)))
    p = tmp_path / "t.json"
    r.to_chrome_trace(str(p))
    d = json.loads(p.read_text())
    phs = {e["ph"] for e in d["traceEvents"]}
    assert {"X", "C", "M"} <= phs
    assert {e["pid"] for e in d["traceEvents"] if e["ph"] == "X"} == set(range(4))
    assert {e["tid"] for e in d["traceEvents"] if e["ph"] == "X"} == {0, 1, 2}
    for dev, (t, b) in enumerate(r.memory_curve):
        assert len(t) == len(b) > 0
        assert b.max() <= r.peak_bytes[dev]  # the analytic peak bounds the schedule's curve
    plot_memory(r, tmp_path / "m.png")
    assert (tmp_path / "m.png").read_bytes()[:4] == b"\x89PNG"


def test_optimizer_time_is_the_profiled_step_split_by_state():
    # a graph with a profiled optimizer step: each stage steps its share of the model state
    g = toy(4)
    g.opt_time_s = 8 * MS
    cl = make_cluster(2)
    one = simulate(g, Strategy.single(4), make_cluster(1))
    assert one.step_time_s == pytest.approx(4 * 1 * MS + 4 * 2 * MS + 8 * MS)
    two = simulate(g, Strategy.from_boundaries(4, [2], dp=1), make_cluster(2))
    assert two.step_time_s == pytest.approx(one.step_time_s - 4 * MS, rel=1e-3)  # each stage: half of 8 ms
    # ZeRO-1 on dp 2: each rank steps half of the state (the parameter broadcast costs ~0 here)
    dp = simulate(g, Strategy(2, 1, [0] * 4, [KEEP] * 4, sharding=["optimizer"]), cl)
    plain = simulate(g, Strategy(2, 1, [0] * 4, [KEEP] * 4), cl)
    assert plain.step_time_s - dp.step_time_s == pytest.approx(4 * MS, rel=1e-3)
    # without a profiled step: state bytes over the device's memory bandwidth
    g.opt_time_s = 0.0
    bare = simulate(g, Strategy.single(4), make_cluster(mem_bw=1e6))
    assert bare.step_time_s == pytest.approx(12 * MS + 4 * (P + P + 2 * P) / 1e6)


def test_pipeline_stage_holds_only_the_inputs_its_nodes_read():
    g = toy(2, input_bytes=64)
    g.inputs = {"x": 40, "y": 24}
    g.nodes[0].read_inputs, g.nodes[1].read_inputs = ["x"], ["y"]
    g.input_free = {"y": 2}  # (each held to its reader's backward: y let go in B1, its stage's last phase)
    assert g.stage_input_bytes(0, 2) == 64 and g.stage_input_bytes(0, 1) == 40 and g.stage_input_bytes(1, 2) == 24
    st = Strategy.from_boundaries(2, [1], dp=1, microbatches=4, schedule=GPIPE)
    base = toy(2)
    r, r0 = simulate(g, st, make_cluster(2)), simulate(base, st, make_cluster(2))
    # GPipe: all 4 micro-batches in flight, each holding its own inputs until its backward
    assert [p - q for p, q in zip(r.peak_bytes, r0.peak_bytes)] == [4 * 40, 4 * 24]


def test_an_input_no_backward_needs_is_let_go_with_its_last_readers_forward():
    """By hand on the toy chain (peak B2): ``y``, read by node 2 and saved by none, is gone by B2 — unless
    node 2 is recomputed (its checkpoint holds what it reads to its backward); in a pipeline no
    micro-batch in flight holds it."""
    def graph(saved):
        g = toy(3, input_bytes=64)
        g.inputs = {"x": 40, "y": 24}
        g.nodes[0].read_inputs, g.nodes[2].read_inputs = ["x"], ["y"]
        g.input_free = {"y": 3 if saved else 2}  # (x to the end; y with B2, or with F2 where no backward needs it)
        return g

    held, let_go = graph(True), graph(False)
    # (saved: held through B2, phase 3, its saver's backward; x, saved by node 0, to the end)
    assert held.input_deaths(0, 3) == ((24, 3, (2,)),) and let_go.input_deaths(0, 3) == ((24, 2, (2,)),)
    one = Strategy.single(3)
    peak = simulate(held, one, make_cluster()).peak_bytes[0]
    assert peak == 9 * P + 64 + 4 * A + 3 * S + P == replay(held, executor=True).peak_bytes == replay(held).peak_bytes
    assert simulate(let_go, one, make_cluster()).peak_bytes[0] == peak - 24 == replay(let_go, executor=True).peak_bytes
    rec = Strategy(1, 1, [0] * 3, [KEEP, KEEP, RECOMPUTE])
    assert simulate(let_go, rec, make_cluster()).peak_bytes[0] == simulate(held, rec, make_cluster()).peak_bytes[0]
    # GPipe, 4 micro-batches in flight on the last stage: each held y to its backward; now none does
    st = Strategy.from_boundaries(3, [2], dp=1, microbatches=4, schedule=GPIPE)
    a, b, c = (simulate(g, st, make_cluster(2)).peak_bytes[1] for g in (held, let_go, toy(3)))
    assert (a - c, b - c) == (4 * 24, 0)


def test_a_later_micro_batchs_backward_finds_its_gradients_made():
    """By hand on the toy chain: B2's transient (3A + S + P) holds node 2's gradient, made before the
    phase's peak. A later micro-batch's B2 finds it there already (a step buffer, in S_after: 3P) and
    adds the new one into it: its peak is P under the first's figure plus S_after. Swapped, the node's
    own figure is left whole (an over-count at worst)."""
    g, h = toy(3), toy(3)
    h.nodes[2].steady_bwd_transient_bytes = h.nodes[2].bwd_transient_bytes - P
    st = Strategy(1, 1, [0] * 3, [KEEP] * 3, microbatches=2)
    a, b = (simulate(x, st, make_cluster()).peak_bytes[0] for x in (g, h))
    state, kept_b2 = 9 * P, 4 * A + 3 * S  # (B2 with every node kept, less its gradient: carried + transient)
    assert a == state + kept_b2 + P + 3 * P  # (B2's own gradient in its transient, and again in S_after)
    assert b == a - P
    st = Strategy(1, 1, [0] * 3, [KEEP, KEEP, SWAP], microbatches=2)
    assert simulate(g, st, make_cluster()).peak_bytes[0] == simulate(h, st, make_cluster()).peak_bytes[0]
