"""A value every node that saves it swaps dies in the last forward that reads it: the CPU's all-swapped trace
frees it inside that forward, in its traced transient (the pack hooks copied it to the host). Where a plan's
other holders keep it on the device past that forward (a recomputed reader's checkpoint, a kept saver), it is
carried through it as well, and was counted twice: a feature-matching loss node reading a critic's features,
swapped, beside recomputed readers, 14% over on the second stage of a GPipe pipeline; a kept ReLU's output read
last by the swapped convolution after it, 32% over at that forward. The profile traces each swapped forward's
peak with what it frees held to its end (``Node.cpu_swap_held_fwd_transient_bytes``), which bounds the two."""
from __future__ import annotations

from pathlib import Path

from tests.onerank import predicted_ranks, phase_where

ROOT = Path(__file__).resolve().parents[1]
HOOKS = str(ROOT / "bench" / "outside5" / "feature_hooks.py")


def test_a_swapped_loss_node_reading_values_a_checkpoint_holds_counts_them_once():
    from memflow.cluster import Cluster
    from memflow.planner import GraphSource, resolve_spec
    from memflow.strategy import Strategy

    g = GraphSource(resolve_spec(HOOKS), Cluster.load("cpu-2"))(2)
    n = g.n
    last = g.nodes[-1]
    assert last.cpu_swap_fwd_transient_bytes > last.fwd_transient_bytes  # (its inputs die inside it, swapped)
    st = Strategy(dp=1, pp=2, stage_of=[0] * (n // 2) + [1] * (n - n // 2),
                  actions=["swap", "recompute"] * (n // 2) + ["swap"] * (n % 2), microbatches=2, schedule="gpipe")
    _, rep = predicted_ranks(HOOKS, g, st, batch=4)
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.01 * r.measured_peak_bytes, (
            r.rank, r.measured_peak_bytes, r.predicted_peak_bytes, r.peak_at)


def test_a_kept_savers_value_read_last_by_a_swapped_forward_is_counted_once():
    """One device, swapped and kept in turn: each swapped forward within 1% of the run's, no phase under (the
    kept backwards after a swapped ReLU whose output a kept convolution saved stay over: not this rule)."""
    from memflow.cluster import Cluster
    from memflow.executor import RunConfig, run_plan
    from memflow.model_file import load_model_file
    from memflow.profile.build import capture_graph
    from memflow.strategy import Strategy
    from simulator.core import Simulator

    g = capture_graph(load_model_file(HOOKS), 8, measure=True, repeats=0)
    n = g.n
    st = Strategy.single(n)
    st.actions = ["swap", "keep"] * (n // 2) + ["swap"] * (n % 2)
    (pred,) = Simulator(g, Cluster.load("cpu-1")).phase_bytes(st)
    cfg = RunConfig(model_file=HOOKS, batch_size=8, strategy=st, steps=2, warmup=1, device="cpu",
                    node_names=[nd.name for nd in g.nodes], capacity_bytes=None)
    (r,) = run_plan(cfg, nproc=1, timeout_s=240).ranks
    for p in range(2 * n):
        k = p if p < n else 2 * n - 1 - p
        where = phase_where(g, p)
        got = r.phase_peaks[where]
        assert pred[p] >= got - 4, (where, pred[p], got)
        if p < n and st.actions[k] == "swap":
            assert pred[p] <= 1.01 * got, (where, pred[p], got)
