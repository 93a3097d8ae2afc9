"""Finer pipeline cuts (issue 25): a ResNet stage of residual blocks is opened into its blocks
(:func:`memflow.graph.capture.block_paths`), so a pipeline can cut inside a stage; where that is faster
the plan does."""
from __future__ import annotations

from pathlib import Path

import pytest

import memflow
from memflow.cluster import Cluster
from memflow.planner import search_problem
from memflow.simulator import Simulator
from memflow.strategy import Strategy

RESNET = str(Path(__file__).resolve().parents[1] / "examples" / "resnet.py")


def _stage(name: str) -> str | None:
    """The ResNet stage a node belongs to ('stages.2' of 'stages.2.4'), None outside the stages."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "stages" and len(parts) == 3 else None


def test_resnet_pipeline_cuts_inside_a_stage_when_that_is_faster(monkeypatch):
    """Full-scale ResNet (fake tensors, V100 roofline), two pipeline stages, 4 micro-batches, every node
    kept: of all cut positions the fastest lies inside a ResNet stage and beats every cut between stages;
    the planner, held to that mesh, cuts inside a stage too."""
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "full")
    kw = dict(gpus=2, gpu_type="v100-16gb", gpu_memory="1TiB", batch_size=32, dp=1, pp=2, microbatches=4)
    graphs, B, usable = search_problem(RESNET, **kw)
    g = graphs[8]
    names = [nd.name for nd in g.nodes]
    inner = [k for k in range(1, g.n) if _stage(names[k - 1]) is not None and _stage(names[k - 1]) == _stage(names[k])]
    assert len(inner) >= 15, names  # the stages' blocks are nodes: [4, 6, 9, 5] blocks, 20 cuts inside stages
    sim = Simulator(g, usable)
    t = {k: sim.evaluate(Strategy(dp=1, pp=2, stage_of=[0] * k + [1] * (g.n - k), actions=["keep"] * g.n,
                                  microbatches=4)).step_time_s for k in range(1, g.n)}
    best = min(t, key=t.get)
    between = min(v for k, v in t.items() if k not in inner)
    assert best in inner and t[best] < between * 0.97, (names[best - 1], names[best], t[best], between)
    p = memflow.plan(RESNET, iterations=1500, **kw)
    cut = p.strategy.stage_of.index(1)
    assert cut in inner, (p.strategy.summary(), names[cut - 1], names[cut])
    assert p.predicted.step_time_s < between
