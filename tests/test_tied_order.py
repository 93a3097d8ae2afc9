"""Weights tied across pipeline stages are summed in one order on every stage (memflow.executor.stage):
a stage lists its parameters in the order its nodes read them, and a tied autoencoder's last stage reads
the encoder's weights last layer first, so the two stages' all-reduces met in the wrong pairs (gloo: a
rank sent 3072 floats where the other expected 1536, and the run aborted)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.onerank import predicted_ranks

PATH = Path(__file__).resolve().parent / "models" / "tied_ae.py"


@pytest.mark.parametrize("pp,stage_of,m", [(2, [0, 0, 1], 1), (3, [0, 1, 2], 2)])
def test_stages_tied_in_reverse_order_train_as_plain_and_as_predicted(pp, stage_of, m):
    from memflow.cluster import Cluster
    from memflow.executor import plain_losses
    from memflow.planner import GraphSource, resolve_spec
    from memflow.strategy import Strategy

    cl = Cluster.load(f"cpu-{pp}")
    st = Strategy(dp=1, pp=pp, stage_of=stage_of, actions=["keep"] * 3, microbatches=m)
    g = GraphSource(resolve_spec(str(PATH)), cl)(st.microbatch_size(8))
    assert g.n == 3  # (the decoder's ops go with the last node: it reads every encoder weight)
    _, rep = predicted_ranks(str(PATH), g, st, batch=8, cluster=f"cpu-{pp}")
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.05 * r.measured_peak_bytes, (
            r.rank, r.measured_peak_bytes, r.predicted_peak_bytes, r.peak_at)
    want = plain_losses(str(PATH), 8, 3, seed=0)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)


def test_weights_handed_on_to_a_later_stage_are_counted_there():
    """A WGAN critic's first node clips every weight in place and hands them on (its outputs are views of
    them), so a later stage reads them as received values: each one and its gradient were on that stage
    and in no plan (18% under). Priced as a replica held there (``Node.handed_params``): over, not under."""
    from memflow.cluster import Cluster
    from memflow.executor import plain_losses
    from memflow.planner import GraphSource, resolve_spec
    from memflow.strategy import Strategy

    path = str(PATH.parent / "clipped_critic.py")
    cl = Cluster.load("cpu-2")
    g = GraphSource(resolve_spec(path), cl)(8)
    assert len({p for nd in g.nodes[6:] for p in nd.handed_params}) == 10  # (every weight, through node 0)
    st = Strategy(dp=1, pp=2, stage_of=[0] * 6 + [1] * 6, actions=["keep"] * g.n, microbatches=1)
    _, rep = predicted_ranks(path, g, st, batch=8)
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes, (r.rank, r.measured_peak_bytes, r.predicted_peak_bytes)
    want = plain_losses(path, 8, 3, seed=0)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)
