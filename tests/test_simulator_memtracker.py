"""Single device, plain training: the simulator's peak equals the task graph's liveness replay as the
executor runs it and is within 2% of PyTorch's fake-mode MemTracker on every example model."""
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

from memflow.cluster import Cluster
from memflow.profile.build import capture_graph
from memflow.graph.record import replay
from memflow.model_file import load_model_file
from memflow.strategy import Strategy
from memflow.simulator import simulate

ROOT = Path(__file__).resolve().parent.parent
TOL = {"gpt2": 0.02, "bert": 0.02, "llama": 0.02, "resnet": 0.02, "lstm": 0.02}


def memtracker_peak(spec, batch_size: int) -> int:
    with FakeTensorMode():
        torch.manual_seed(0)
        model = spec.build()
        batch = spec.batch(batch_size)
        opt = spec.make_optimizer(model.parameters())

        def step():
            loss = spec.loss(model, batch)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        step()  # optimizer state exists from here on, as in the task graph's traced step
        mt = MemTracker()
        mt.track_external(model, opt, *torch.utils._pytree.tree_leaves(batch))
        with mt:
            step()
        return sum(v["Total"] for v in mt.get_tracker_snapshot("peak").values())


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(TOL))
def test_single_device_peak_matches_replay_and_memtracker(name):
    spec = load_model_file(ROOT / "examples" / f"{name}.py")
    g = capture_graph(spec, 8)
    cl = Cluster.load("cpu-1").with_memory(2**40)
    sim = simulate(g, Strategy.single(g.n), cl)
    assert sim.peak_bytes[0] == replay(g, executor=True).peak_bytes
    ref = memtracker_peak(spec, 8)
    assert abs(sim.peak_bytes[0] / ref - 1) <= TOL[name], (sim.peak_bytes[0], ref)
