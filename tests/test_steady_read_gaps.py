"""A value a kept node's backward reads last, let go with that node's saved tensors: its phase peaks lower by
what the peak after that node stands above the peak before it (``Buffer.read_gaps``). A later micro-batch's
backward adds its gradients into those the first made, in place, so its peak can come before the node is
through, with the value still there: ``Buffer.steady_read_gaps`` are the same gaps from the steady peaks.

A Gumbel-softmax VQ-VAE (bench/outside14/gumbel_vq.py) on two stages, its decoder's ReLU selective and the
transposed conv after it kept: the ReLU's output is held by the conv alone and let go after it; the conv's
first backward peaks after (its weight gradient copied as it is made), a later one's before. Priced with the
first's gap, the second micro-batch's backward ran 1,984 B above its plan."""
from __future__ import annotations

from pathlib import Path

from tests.onerank import predicted_ranks

ROOT = Path(__file__).resolve().parents[1]
MODEL = str(ROOT / "bench" / "outside14" / "gumbel_vq.py")


def test_a_later_micro_batchs_backward_holds_what_its_first_let_go_before_its_peak():
    from memflow.cluster import Cluster
    from memflow.planner import GraphSource, resolve_spec
    from memflow.strategy import Strategy

    g = GraphSource(resolve_spec(MODEL), Cluster.load("cpu-2"))(2)
    names = [nd.name for nd in g.nodes]
    relu, conv = names.index("dec.1"), names.index("dec.2")
    # the ReLU's output: read last by the conv's backward, with a gap in the one-micro-batch trace and none in
    # its steady peaks
    out = [b for b in g.buffers if b.alloc_phase == relu and b.read_gaps]
    bp = 2 * g.n - 1 - conv
    assert out and all(p == bp for b in out for p, _ in b.read_gaps), [(b.nbytes, b.read_gaps) for b in out]
    assert all(not b.steady_read_gaps for b in out), [(b.nbytes, b.steady_read_gaps) for b in out]
    half = g.n // 2
    actions = ["keep"] * g.n
    actions[relu] = "selective"
    st = Strategy(dp=1, pp=2, stage_of=[0] * half + [1] * (g.n - half), actions=actions, microbatches=2,
                  sharding=["none", "none"])
    _, rep = predicted_ranks(MODEL, g, st, batch=4, steps=2)
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.01 * r.measured_peak_bytes, (
            r.rank, r.measured_peak_bytes, r.predicted_peak_bytes, r.peak_at)
    second = rep.ranks[1]
    where = f"backward of node {conv} (dec.2), micro-batch 1"
    assert second.phase_peaks[where] == second.measured_peak_bytes == second.predicted_peak_bytes, (
        second.phase_peaks[where], second.measured_peak_bytes, second.predicted_peak_bytes)
