"""A swapped node that saves the step's batch (a patchify or stem convolution saves the images): the
batch stays on the device, as the profiler traced it and the simulator counts it, so the first
stage's measured peak is the predicted one (before, the executor swapped the images out and used
less than predicted: HF ConvNeXt's first stage, 4 micro-batches, −37%)."""
from __future__ import annotations

import pytest

from memflow.model_file import load_model_file
from memflow.profile.build import capture_graph
from memflow.strategy import Strategy
from tests.onerank import predicted_run

MODEL = '''
import torch
from torch import nn
BATCH_SIZE = 4
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 4, stride=4)
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(8 * 8 * 8, 32), nn.GELU())
        self.head = nn.Linear(32, 10)
    def forward(self, x):
        return self.head(self.body(self.stem(x)))
def build_model():
    return M()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return nn.functional.cross_entropy(out, y)
'''
SGD = '''
def optimizer(params):  # (no state: the step's peak is in a backward, where the swap acts)
    return torch.optim.SGD(params, lr=0.1)
'''


def _run(tmp_path, actions, m, optimizer=SGD):
    f = tmp_path / "stem.py"
    f.write_text(MODEL + optimizer)
    spec = load_model_file(f)
    g = capture_graph(spec, 8 // m, measure=True, repeats=0)
    assert [nd.name for nd in g.nodes] == ["stem", "body", "head"]
    st = Strategy(dp=1, pp=1, stage_of=[0, 0, 0], actions=actions, microbatches=m, schedule="1f1b")
    pred, r = predicted_run(f, g, st)
    return r, pred


@pytest.mark.parametrize("actions,m", [(["swap", "keep", "keep"], 2), (["swap", "swap", "keep"], 4),
                                       (["swap", "keep", "keep"], 1), (["keep", "keep", "keep"], 2)])
def test_a_swapped_node_reading_the_batch_peaks_as_predicted(tmp_path, actions, m):
    r, _ = _run(tmp_path, actions, m)
    assert abs(r.predicted_peak_bytes / r.measured_peak_bytes - 1) <= 0.01, (r.measured_peak_bytes,
                                                                             r.predicted_peak_bytes)


def test_the_optimizer_step_holds_no_batch(tmp_path):
    """AdamW (the default): in the optimizer step no micro-batch's inputs are on the device any more
    (each dies with its backward); the simulator counted one micro-batch's images there, and predicted
    the step's peak there, 12% above the measured one, before."""
    r, pred = _run(tmp_path, ["keep"] * 3, 2, optimizer="")
    ev = pred.breakdown[0]
    assert ev["phase"] != "OPT" or r.peak_at == "optimizer step", (ev, r.peak_at)
    assert abs(r.predicted_peak_bytes / r.measured_peak_bytes - 1) <= 0.01, (r.measured_peak_bytes,
                                                                             r.predicted_peak_bytes)
