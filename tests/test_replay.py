"""A node whose replay would compute other values than its forward keeps (memflow.graph.aliases.replay_unsafe,
memflow.kinds.replay_safe): spectral normalisation updates its power-iteration vectors in place and
builds the weight from them, so a recomputed node started its replay from the updated vectors and the
planned step trained otherwise than plain training (0.5% off its losses by the third step, silently)."""
from __future__ import annotations

from pathlib import Path

import torch

MODELS = Path(__file__).resolve().parent / "models"
PATH = str(MODELS / "specnorm.py")


EMA = """
import torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("ema", torch.zeros(4))
    def forward(self, x):
        with torch.no_grad():
            self.ema.mul_(0.9).add_(0.1 * x.mean(0))
        return self.fc(x - self.ema).pow(2).mean()
def build_model():
    return Net()
def example_batch(b):
    return {"x": torch.randn(b, 4)}
"""


def test_which_nodes_a_replay_would_change(tmp_path):
    """Spectral norm's nodes, an EMA read after its update, a parameter clipped in place and then read;
    not BatchNorm's running statistics (its training output does not read them) nor its step counter."""
    from memflow.planner import resolve_spec
    from memflow.profile.build import capture_graph

    (tmp_path / "ema.py").write_text(EMA)
    for path, want in ((PATH, ["0", "2", "5"]), (MODELS / "segnet.py", []), (MODELS / "clipped_critic.py", ["net.0"]),
                       (tmp_path / "ema.py", ["fc"])):
        g = capture_graph(resolve_spec(str(path)), 4, measure=False)
        assert [g.nodes[k].name for k in g.meta["replay_unsafe"]] == want, path


def test_recomputed_spectral_norm_trains_as_plain_and_as_predicted():
    from memflow.cluster import Cluster
    from memflow.executor import RunConfig, plain_losses, run_plan
    from memflow.planner import GraphSource, resolve_spec
    from memflow.simulator import Simulator
    from memflow.strategy import Strategy

    cl = Cluster.load("cpu-1")
    g = GraphSource(resolve_spec(PATH), cl)(8)
    assert [g.nodes[k].name for k in g.meta["replay_unsafe"]] == ["0", "2", "5"]
    rec = Strategy.single(g.n, action="recompute")
    keep = Strategy.single(g.n)
    sim = Simulator(g, cl)
    # the spectrally normalised nodes keep: priced as the plan that keeps them, the rest recomputed
    mixed = Strategy(dp=1, pp=1, stage_of=[0] * g.n, microbatches=1,
                     actions=["keep" if k in g.meta["replay_unsafe"] else "recompute" for k in range(g.n)])
    a, b = sim.evaluate(rec), sim.evaluate(mixed)
    assert a.peak_bytes == b.peak_bytes and a.step_time_s == b.step_time_s != sim.evaluate(keep).step_time_s
    pred = sim.evaluate(rec, detail=True)
    cfg = RunConfig(model_file=PATH, batch_size=8, strategy=rec, steps=3, warmup=0, device="cpu",
                    node_names=[nd.name for nd in g.nodes], capacity_bytes=None,
                    predicted={"peak_bytes": pred.peak_bytes, "step_time_s": pred.end_s})
    rep = run_plan(cfg, nproc=1, timeout_s=240)
    r = rep.ranks[0]
    assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.02 * r.measured_peak_bytes, (r.measured_peak_bytes,
                                                                                              r.predicted_peak_bytes)
    want = plain_losses(PATH, 8, 3, seed=0)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)


def test_the_plan_writes_them_kept():
    from memflow.cluster import Cluster
    from memflow.planner import plan

    cl = Cluster.load("cpu-1")
    p = plan(PATH, cluster=cl.with_memory(cl.device.memory_bytes // 100000), batch_size=8, time_budget_s=0.3)
    unsafe = {0, 2, 5}
    assert all(a == "keep" or a == "swap" for k, a in enumerate(p.strategy.actions) if k in unsafe), p.strategy.actions
