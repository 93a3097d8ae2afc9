"""What a recomputed or selective node's checkpoint holds through its backward, found on models written
from the outside (bench/outside5):

- a loss head reading many features (a feature-matching loss over a frozen critic's activations, kept by
  forward hooks) frees each feature as its own loss term's backward is through; recomputed, its
  checkpoint holds every input it read until the last of its ops with saved tensors is through. The
  simulator priced the recompute at the kept backward's figure: 13.6% under on one device, 15.6% on a
  pipeline's last stage. The trace now records each backward's peak with those inputs held
  (``Node.rec_held_bwd_transient_bytes``);
- ALiBi's attention bias, made before the first block and read by every block, is received by a later
  stage; that stage's first block under ``selective`` holds it to its backward's end, where the
  all-selective trace (in which the earlier blocks held it longer) had it carried: 9 KiB under;
- a checkpointed node that saves no tensor holds nothing, a batch input it reads included (PatchTST's scaler,
  bench/outside4, standardising its input with ops on values that need no gradient): its input was held to
  its backward, 10% over a small stage (tests/models/scaled_input.py: 18% over on one device)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.onerank import predicted_ranks

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("model,cluster,stage_of,actions", [
    # the loss head (the critic's last convolution on the real image, with the loss) recomputed, one device
    ("feature_hooks", "cpu-1", None, {14: "recompute"}),
    # every node recomputed, two stages, two micro-batches
    ("feature_hooks", "cpu-2", 7, "recompute"),
    # the later stage's first block selective, the bias received
    ("alibi_sdpa", "cpu-2", 3, {3: "selective"}),
    # a scaler that saves no tensor, selective or recomputed, first on its device
    ("tests/models/scaled_input", "cpu-1", None, {0: "selective"}),
    ("tests/models/scaled_input", "cpu-1", None, {0: "recompute"}),
])
def test_a_checkpoints_holds_are_priced(model, cluster, stage_of, actions):
    from memflow.cluster import Cluster
    from memflow.executor import plain_losses
    from memflow.planner import GraphSource, resolve_spec
    from memflow.strategy import Strategy

    path = str(ROOT / (model if "/" in model else f"bench/outside5/{model}")) + ".py"
    g = GraphSource(resolve_spec(path), Cluster.load(cluster))(4)
    acts = [actions] * g.n if isinstance(actions, str) else [actions.get(k, "keep") for k in range(g.n)]
    so = [0] * g.n if stage_of is None else [0] * stage_of + [1] * (g.n - stage_of)
    pp = max(so) + 1
    m = 2 if isinstance(actions, str) else 1
    st = Strategy(dp=1, pp=pp, stage_of=so, actions=acts, microbatches=m)
    _, rep = predicted_ranks(path, g, st, batch=4 * m, cluster=cluster)
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.01 * r.measured_peak_bytes, (
            r.rank, r.measured_peak_bytes, r.predicted_peak_bytes, r.peak_at)
    want = plain_losses(path, 4 * m, 3, seed=0)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)


@pytest.mark.parametrize("recompute", ["last", "all"])
def test_a_recomputed_last_node_replays_beside_the_gradient_it_received(recompute):
    """The first stage's last node recomputed, whose replay (a large temporary needing no gradient) is its
    backward's peak: the gradient the next stage sent for its output is alive beside it. The layout dates a
    received gradient to the F half's last phase, as if that node had made it, and the replay counted only
    what it had not made itself: 4 KiB under here, 61 KiB (3%) on SpeechT5's encoder layer norm."""
    from memflow.cluster import Cluster
    from memflow.planner import GraphSource, resolve_spec
    from memflow.strategy import Strategy

    path = str(ROOT / "tests" / "models" / "late_mask.py")
    g = GraphSource(resolve_spec(path), Cluster.load("cpu-2"))(2)
    n = g.n
    acts = ["recompute"] * n if recompute == "all" else ["keep", "keep", "recompute"] + ["keep"] * (n - 3)
    st = Strategy(dp=1, pp=2, stage_of=[0] * 3 + [1] * (n - 3), actions=acts, microbatches=2)
    _, rep = predicted_ranks(path, g, st, batch=4)
    r = rep.ranks[0]
    assert r.peak_at.startswith("backward of node 2"), r.peak_at  # (the replay is the stage's peak)
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.005 * r.measured_peak_bytes, (
            r.rank, r.predicted_peak_bytes, r.measured_peak_bytes, r.peak_at)
