"""A model that changes trainable parameters in place in forward is planned one micro-batch per step
(memflow.inflight): two forwards before a backward find the first one's saved weights changed, in plain
PyTorch as in a plan (a random plan of a WGAN critic that clips its weights in forward, GPipe over two
micro-batches, stopped on autograd's error on both ranks)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memflow.errors import ConfigError

PATH = str(Path(__file__).resolve().parent / "models" / "clipped_critic.py")


def test_two_forwards_before_a_backward_fail_in_plain_pytorch():
    """The rule the plan keeps, shown on plain PyTorch: accumulating over two forwards first raises."""
    from memflow.model_file import load_model_file

    spec = load_model_file(PATH, guard=False)
    model, batch = spec.build(), spec.batch(8)
    first, second = spec.loss(model, batch), spec.loss(model, batch)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (first + second).backward()
    spec.loss(model, batch).backward()  # (one forward, then its backward: as a plan of one micro-batch runs)


def test_the_profile_names_them_and_the_plan_keeps_one_micro_batch(capfd):
    from memflow.cluster import Cluster
    from memflow.planner import plan
    from memflow.profile.build import capture_graph
    from memflow.planner import resolve_spec

    g = capture_graph(resolve_spec(PATH), 4, measure=False)
    names = {f"model.{n}" for n, _ in torch.nn.Module.named_parameters(resolve_spec(PATH).build())}
    assert set(g.meta["written_params"]) == names
    cl = Cluster.load("cpu-2")
    cl = cl.with_memory(cl.device.memory_bytes // 4096)  # (tight: micro-batches would be the search's way)
    p = plan(PATH, cluster=cl, batch_size=8, time_budget_s=0.5, seed=0)
    assert p.strategy.microbatches == 1
    err = capfd.readouterr().err
    assert "changes parameters in place in forward (net.0.bias, net.0.weight, net.1.weight and 7 more)" in err
    with pytest.raises(ConfigError, match="with 2 micro-batches a second forward would change"):
        plan(PATH, cluster="cpu-2", batch_size=8, time_budget_s=0.5, microbatches=2)


def test_a_model_that_changes_only_buffers_is_not_limited():
    """BatchNorm's running statistics change in forward too, but nothing saves them for a backward."""
    from memflow.planner import resolve_spec
    from memflow.profile.build import capture_graph

    g = capture_graph(resolve_spec(str(Path(PATH).parent / "segnet.py")), 4, measure=False)
    assert g.meta["written_params"] == []
