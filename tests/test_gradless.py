"""A parameter the step gives no gradient (a pooler computed and never read) stays out of the data-parallel
all-reduce (memflow.executor.grads), as plain training's optimizer leaves it: the executor gave it a zero
gradient, memory no plan counted (twice over, in the bucket's flat copy: BERT2BERT's pooler, 8 KiB under
at dp 2) and an update plain training never makes. The profile names such parameters and the simulator's
buckets leave them out too (``TaskGraph.meta["gradless_params"]``). ZeRO-2 and ZeRO-3 step every parameter of
their flat slices, so their state holds such a parameter's share where plain training's holds none: priced
now (the simulator's ``O_gradless``), and the flat gradient copy is filled in place, without a zero tensor
per such parameter beside it (ZeRO-2 was 6.7% under, ZeRO-3 7.8%, before).

ZeRO-3 with the parameters on the host: the per-step buffers lost each unit's whole gradient after its
backward, which the trace never held for a gradless unit (its flat copy is zeros), and the sync point
held it too: 6.9% under with one micro-batch, 9.5% with two (``Zero3Facts.made``). Without the host the
under-count was hidden by the gradless unit's optimizer state counted whole, not as the rank's slice.

The pooler's unread output (a dead branch: tanh saved it) was held by the trace's saved-tensor hook to the
step's end (tests/test_dead_branch.py): 512 bytes over in every mode, which hid a few bytes under where a
ZeRO-2 bucket or a ZeRO-3 unit is padded to whole elements per rank and the flat step keeps one step count
per unit (2-5 bytes under, now 0-0.02% over)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.onerank import predicted_ranks

PATH = str(Path(__file__).resolve().parent / "models" / "unused_pooler.py")


@pytest.mark.parametrize("m,sharding,host", [(1, "none", False), (2, "none", False), (1, "gradients", False),
                                             (2, "gradients", False), (1, "parameters", False),
                                             (1, "parameters", True), (2, "parameters", True)])
def test_a_gradless_parameter_is_not_all_reduced(m, sharding, host):
    from memflow.cluster import Cluster
    from memflow.executor import plain_losses
    from memflow.planner import GraphSource, resolve_spec
    from memflow.strategy import Strategy

    cl = Cluster.load("cpu-2")
    g = GraphSource(resolve_spec(PATH), cl)(8 // (2 * m))
    assert g.meta["gradless_params"] == ["model.pooler.bias", "model.pooler.weight"]
    st = Strategy(dp=2, pp=1, stage_of=[0] * g.n, actions=["keep"] * g.n, microbatches=m, sharding=[sharding],
                  optimizer_on_host=[host], params_on_host=[host])
    _, rep = predicted_ranks(PATH, g, st, batch=8)
    for r in rep.ranks:  # (0-0.02% over: the step counts of a unit's state, one per parameter, kept whole)
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.001 * r.measured_peak_bytes, (
            r.measured_peak_bytes, r.predicted_peak_bytes, r.peak_at)
    want = plain_losses(PATH, 8, 3, seed=0)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)
