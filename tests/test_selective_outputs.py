"""A selective node whose policy holds its own outputs (a convolution's, DenseNet's stem) holds the
same storages the layout carries as those outputs: the simulator extends their lives to the node's
backward instead of carrying them twice. Checked against a fake run of the step as one GPU runs it
(:func:`memflow.reserved.fake_reserved`), on the DenseNet and MobileNetV2 of ``bench/unseen``, every
node selective: to the byte (they were 4.5% and 2.8% over, the stem's 256 KiB counted twice)."""
from __future__ import annotations

from pathlib import Path

import pytest

from memflow.cluster import Cluster
from memflow.model_file import load_model_file
from memflow.profile import profile_model
from memflow.reserved import fake_reserved
from memflow.simulator import Simulator
from memflow.strategy import Strategy

ROOT = Path(__file__).resolve().parents[1]


# (MobileNetV2, the same rule on depthwise convolutions: MEMFLOW_TEST_FULL=1)
@pytest.mark.parametrize("model", ["densenet", pytest.param("mobilenet", marks=pytest.mark.full)])
def test_a_selective_node_holding_its_outputs_counts_them_once(monkeypatch, model):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    spec = load_model_file(ROOT / "bench" / "unseen" / f"{model}.py")
    cl = Cluster.for_gpus(1, "h100-80gb")
    g = profile_model(spec, 4, device=cl.device, dtype="fp32", cache=False)
    stem = g.nodes[0]
    # the stem's policy holds its one output (a convolution's) for its backward: all of its outputs
    assert 0 < stem.sel_held_out_bytes == stem.sel_saved_bytes
    predicted = Simulator(g, cl).evaluate(Strategy.single(g.n, action="selective")).peak_bytes[0]
    got = fake_reserved(spec, 4, "selective", dtype="fp32", workspace=0, steps=2)["peak_live"]
    assert predicted == got, (predicted, got)
