"""A dead branch of the graph (RWKV's CPU recurrence: the last step's state update, read by nothing) whose
op saved its own output: autograd hands a saved-tensor hook that output with its own grad_fn, and a hook
holding it as is makes a cycle (output -> grad_fn -> saved output) that no backward breaks, kept to the
next garbage collection. The trace's hook held it so: RWKV's final states were counted to the step's end,
its plans 0.5% over kept, 5.1% over with swapped blocks (the swap's hook kept small tensors as is too).
Both hooks now hold what they keep detached."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.onerank import predicted_ranks

PATH = str(Path(__file__).resolve().parent / "models" / "dead_state.py")


def _graph(cluster):
    from memflow.cluster import Cluster
    from memflow.planner import GraphSource, resolve_spec
    return GraphSource(resolve_spec(PATH), Cluster.load(cluster))(4)


def test_no_forward_buffer_outlives_the_step():
    g = _graph("cpu-1")
    n = g.n
    assert not [(b.nbytes, b.alloc_phase) for b in g.buffers if b.alloc_phase < n and b.free_phase > 2 * n - 1]


@pytest.mark.parametrize("pp,acts", [(1, ["keep"] * 4), (2, ["keep", "swap", "keep", "keep"])])
def test_a_dead_branch_is_not_counted_past_its_forward(pp, acts):
    """(before: +0.9% kept on one device, +1.6% on the first stage with its second block swapped; what is
    left over, 0.2-0.4%, is the loss's target counted through its saver's whole backward)"""
    from memflow.strategy import Strategy
    g = _graph(f"cpu-{pp}")
    st = Strategy(dp=1, pp=pp, stage_of=[0, 0, 1, 1] if pp == 2 else [0] * 4, actions=acts)
    _, rep = predicted_ranks(PATH, g, st, batch=4, cluster=f"cpu-{pp}")
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.005 * r.measured_peak_bytes, (
            r.rank, r.predicted_peak_bytes, r.measured_peak_bytes, r.peak_at)


def test_a_recomputed_node_no_backward_runs_through_is_priced_without_a_replay():
    """CANINE's shape (tests/models/hashed_ids.py): its upsampling branch, first on the second stage, runs and the
    loss never reads it, so no backward runs through it (TaskGraph.meta no_backward). Recomputed, its checkpoint
    never replays: priced with the replay, the stage's peak was its backward phase, 27% over the run's (CANINE
    itself: 27-33%); without, each rank's peak is the run's within 1%, and the losses are plain training's."""
    from memflow.executor import plain_losses
    from memflow.strategy import Strategy
    path = str(Path(__file__).resolve().parent / "models" / "hashed_ids.py")
    from memflow.cluster import Cluster
    from memflow.planner import GraphSource, resolve_spec
    g = GraphSource(resolve_spec(path), Cluster.load("cpu-2"))(4)
    cut = [nd.name for nd in g.nodes].index("up")
    assert g.meta["no_backward"] == [cut]
    st = Strategy(dp=1, pp=2, stage_of=[0] * cut + [1] * (g.n - cut), actions=["recompute"] * g.n)
    _, rep = predicted_ranks(path, g, st, batch=4, cluster="cpu-2")
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.01 * r.measured_peak_bytes, (
            r.rank, r.predicted_peak_bytes, r.measured_peak_bytes, r.peak_at)
    want = plain_losses(path, 4, 3, seed=0)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)



def test_an_unread_pooler_holds_no_input_for_a_backward():
    """HF LayoutLM for token classification (tests/models/layoutlm_tokencls.py, written for the tenth outside round):
    its pooler, computed and unread, first on the last stage, reads the received encoder output beside the
    classifier. Recomputed, its checkpoint goes with its unread output, as a kept node's saved tensors would; the
    model had it hold the encoder output to the pooler's backward phase, counted beside the trace's figure for the
    classifier's backward, where it dies: 5,120 B, 25% of the small last stage, over. And the optimizer step priced
    the pooler's weights as gradients and stepped them: the optimizer skips parameters without one (36% over on a
    stage holding an unread pooler, tests/models/unused_pooler.py)."""
    from memflow.strategy import Strategy
    path = str(Path(__file__).resolve().parent / "models" / "layoutlm_tokencls.py")
    from memflow.cluster import Cluster
    from memflow.planner import GraphSource, resolve_spec
    g = GraphSource(resolve_spec(path), Cluster.load("cpu-2"))(2)
    cut = [nd.name for nd in g.nodes].index("layoutlm.pooler")
    assert g.meta["no_backward"] == [cut]
    st = Strategy(dp=1, pp=2, stage_of=[0] * cut + [1] * (g.n - cut), actions=["recompute"] * g.n, microbatches=2)
    _, rep = predicted_ranks(path, g, st, batch=4, cluster="cpu-2")
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.005 * r.measured_peak_bytes, (
            r.rank, r.predicted_peak_bytes, r.measured_peak_bytes, r.peak_at)


@pytest.mark.parametrize("acts", [("recompute", "recompute"), ("selective", "keep"), ("recompute", "keep")])
def test_a_stage_holding_an_unread_pooler_steps_no_gradient_for_it(acts):
    """An unread pooler first on the last stage, its weights without gradients: the stage's optimizer step was
    priced with them as gradients, and their temporaries (36% over); the optimizer skips them."""
    from memflow.strategy import Strategy
    path = str(Path(__file__).resolve().parent / "models" / "unused_pooler.py")
    from memflow.cluster import Cluster
    from memflow.planner import GraphSource, resolve_spec
    g = GraphSource(resolve_spec(path), Cluster.load("cpu-2"))(4)
    cut = [nd.name for nd in g.nodes].index("pooler")
    assert g.meta["no_backward"] == [cut] and g.n == cut + 2
    st = Strategy(dp=1, pp=2, stage_of=[0] * cut + [1, 1], actions=["keep"] * cut + list(acts))
    _, rep = predicted_ranks(path, g, st, batch=4, cluster="cpu-2")
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.005 * r.measured_peak_bytes, (
            r.rank, r.predicted_peak_bytes, r.measured_peak_bytes, r.peak_at)
