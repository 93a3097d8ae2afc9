"""Autocast's cast cache and the per-node actions: under bf16 autocast a parameter's bf16 cast is cached
until the autocast region exits (a stage's forward of one micro-batch), so a recomputed or swapped node's
casts outlive its forward though its checkpoint or its pack hook let go of them (a selective node runs
uncached). Checked on T5 (bench/unseen/t5.py), whose peak falls in the forward after its blocks: the
simulator's peak equals a fake run's of the step as one GPU runs it, and a real run's on this CPU (the
old model was 0.9% under both)."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
T5 = ROOT / "bench" / "unseen" / "t5.py"


@pytest.fixture()
def t5(monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from memflow.model_file import load_model_file

    return load_model_file(T5)


def test_a_recomputed_blocks_casts_are_held_to_the_forwards_end(t5):
    from memflow.cluster import Cluster
    from memflow.profile import profile_model
    from memflow.reserved import fake_reserved
    from memflow.simulator import Simulator
    from memflow.strategy import Strategy

    cl = Cluster.for_gpus(1, "h100-80gb")
    g = profile_model(t5, 4, device=cl.device, dtype="bf16", cache=True)
    names = [nd.name for nd in g.nodes]
    for block in ("encoder.block.0", "decoder.block.0"):
        acts = ["keep"] * g.n
        acts[names.index(block)] = "recompute"
        predicted = Simulator(g, cl).evaluate(Strategy.single(g.n).copy(actions=acts)).peak_bytes[0]
        got = fake_reserved(t5, 4, acts, dtype="bf16", workspace=0, steps=2)["peak_live"]
        assert predicted == got, (block, predicted, got)


@pytest.mark.parametrize("action", [pytest.param("R", marks=pytest.mark.full), "S"])
def test_a_real_run_holds_a_recomputed_or_swapped_blocks_casts(action):
    """The executor on one CPU device in bf16, encoder.block.0 recomputed or swapped: the accounted peak
    is the prediction, to the byte."""
    from bench.bench_fidelity import run_case

    rows = run_case(str(T5), {}, 4, "pattern:KK" + action + "K" * 10, steps=2, runs=1, warmup=1, dtype="bf16")
    (r,) = rows
    assert r["mp"] == r["pp"], r


def test_a_replay_runs_beside_what_the_backward_made_before_it(t5):
    """Every node recomputed: each T5 block's backward casts its output gradient to bf16 for the last
    linear's backward before that linear asks for its saved input, whose unpack sets the replay off;
    the cast lives through the replay. The profile records those bytes per node
    (``bwd_pre_replay_bytes``) and the simulator adds them to the replay: its peak is the fake run's
    to the byte (it was 4,096 bytes under, 0.46%, in encoder.block.0's backward)."""
    from memflow.cluster import Cluster
    from memflow.profile import profile_model
    from memflow.reserved import fake_reserved
    from memflow.simulator import Simulator
    from memflow.strategy import Strategy

    cl = Cluster.for_gpus(1, "h100-80gb")
    g = profile_model(t5, 4, device=cl.device, dtype="bf16", cache=True)
    blocks = [nd for nd in g.nodes if ".block." in nd.name]
    assert blocks and all(nd.bwd_pre_replay_bytes > 0 for nd in blocks)
    acts = ["recompute"] * g.n
    predicted = Simulator(g, cl).evaluate(Strategy.single(g.n).copy(actions=acts)).peak_bytes[0]
    got = fake_reserved(t5, 4, acts, dtype="bf16", workspace=0, steps=2)["peak_live"]
    assert predicted == got
