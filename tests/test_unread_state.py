"""Model state the step never reads (an unused buffer, an unused layer) is memory all the same:
counted on the node of its module, predicted, and accounted by the executor."""
from __future__ import annotations

import pytest
import torch

import memflow
from memflow.buckets import dtype_kind
from memflow.cluster import Cluster
from memflow.graph.record import replay
from memflow.model_file import load_model_file
from memflow.profile.build import capture_graph, capture_graphs
from memflow.profile.measure import measure_plain_step
from memflow.simulator import Simulator
from memflow.strategy import Strategy

BIG = 2_000_000  # floats: 8 MB, against ~2 KB of parameters

MODEL = f'''
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, big):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        if big:
            self.register_buffer("table", torch.zeros({BIG}))  # never read by forward


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(False), Block(True)])
        self.spare = nn.Linear(16, 16)  # never called
        self.register_buffer("scratch", torch.zeros(1000), persistent=False)  # never read
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        for b in self.blocks:
            x = torch.relu(b.lin(x))
        return self.head(x)


def build_model():
    return Net()


def example_batch(batch_size):
    return torch.randn(batch_size, 16), torch.randint(0, 2, (batch_size,))


def loss_fn(output, target):
    return nn.functional.cross_entropy(output, target)
'''


@pytest.fixture
def model_file(tmp_path, monkeypatch):
    path = tmp_path / "unread.py"
    path.write_text(MODEL)
    return path


@pytest.mark.parametrize("measure", [False, True])
def test_unread_state_is_counted_on_its_modules_node(model_file, measure):
    spec = load_model_file(model_file)
    g = capture_graph(spec, 4, measure=measure, repeats=1)
    names = [nd.name for nd in g.nodes]
    owner = g.nodes[names.index("blocks.1")]
    assert "model.blocks.1.table" in owner.param_names and owner.param_bytes > 4 * BIG
    assert g.params["model.blocks.1.table"][:4] == [4 * BIG, 0, 0, owner.index]  # no gradient, no optimizer state
    assert g.params["model.blocks.1.table"][4] == dtype_kind(torch.float32)  # (what a gradient bucket holds one of)
    # the module that never runs and the root's buffer: the first node
    assert {"model.spare.weight", "model.spare.bias", "model.scratch"} <= set(g.nodes[0].param_names)
    assert g.params["model.spare.weight"][1:3] == [0, 0]
    # the record's state is the traced one, and that of a plain step (which holds every tensor of the model)
    real = measure_plain_step(spec, 4, repeats=1)
    assert g.state_bytes == g.meta["traced_state_bytes"] == real.state_bytes
    assert replay(g).peak_bytes == g.meta["traced_peak_bytes"]
    assert replay(g).peak_bytes == pytest.approx(real.peak_bytes, rel=0.01)


def test_unread_state_in_every_size_of_a_shared_capture(model_file):
    spec = load_model_file(model_file)
    graphs = capture_graphs(spec, [1, 2, 4])
    for b, g in graphs.items():
        assert g.params["model.blocks.1.table"][0] == 4 * BIG, b
        assert replay(g).peak_bytes > 4 * BIG


def test_unread_state_sits_on_its_pipeline_stage(model_file):
    spec = load_model_file(model_file)
    g = capture_graph(spec, 4)
    k = [nd.name for nd in g.nodes].index("blocks.1")
    sim = Simulator(g, Cluster.load("cpu-2")).evaluate(Strategy.from_boundaries(g.n, [k], dp=1), detail=True)
    assert sim.peak_bytes[1] > 4 * BIG > sim.peak_bytes[0]


def test_unread_buffer_predicted_and_measured(model_file, monkeypatch):
    """A tiny CPU plan: the prediction holds the unused buffer, and so does the run (within 5%)."""
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    p = memflow.plan(str(model_file), cluster="cpu-2", batch_size=4, time_budget_s=2)
    assert max(p.predicted.peak_bytes) > 4 * BIG
    report = memflow.run(p, steps=2)
    assert max(r.measured_peak_bytes for r in report.ranks) > 4 * BIG
    for r in report.ranks:
        assert r.measured_peak_bytes == pytest.approx(r.predicted_peak_bytes, rel=0.05), r
