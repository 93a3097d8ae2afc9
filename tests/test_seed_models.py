"""The seeds' workloads (examples/resnet_deep.py, moe.py, unet3d.py, nmt.py) at tiny scale: each is
captured, planned on cpu-2 under memory tighter than plain data parallel needs, and run two steps
through the executor under the plan's capacity; every knob the file declares changes the model.

The default suite plans each on a simulated GPU (fake tensors, seconds); the cpu-2 plan-and-run
test (about a minute per model on a 2-core host) runs with ``MEMFLOW_SEED_RUNS=1``."""
import importlib.util
import math
import os
from pathlib import Path

import pytest

from bench.bench_unseen import planned_run
from memflow.cluster import Cluster
from memflow.model_file import load_model_file
from memflow.planner import GraphSource, plan, resolve_spec
from memflow.simulator import Simulator
from memflow.strategy import Strategy

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SEEDS = ["resnet_deep", "moe", "unet3d", "nmt"]
BATCH = 8


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"seed_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", SEEDS)
def test_knobs_grow_the_model(name, tiny, monkeypatch):
    """Each declared knob is an environment variable the file reads; a larger value builds a model
    with more parameters (depth, experts) or a larger batch (seq)."""
    spec = load_model_file(EXAMPLES / f"{name}.py")
    assert spec.knobs, name
    for knob, k in spec.knobs.items():
        var = k if isinstance(k, str) else k["env"]
        lo = 2 if isinstance(k, str) else int(k.get("min", 1))
        step = 1 if isinstance(k, str) else int(k.get("step", 1))
        sizes = []
        for v in (lo + step, lo + 3 * step):
            monkeypatch.setenv(var, str(v))
            m = _load(name)
            if knob == "seq":
                flat = [t for t in _flat(m.example_batch(2))]
                sizes.append(sum(t.numel() for t in flat))
            else:
                sizes.append(sum(p.numel() for p in m.build_model().parameters()))
        assert sizes[1] > sizes[0], (name, knob, sizes)


def _flat(x):
    if isinstance(x, (tuple, list)):
        for y in x:
            yield from _flat(y)
    else:
        yield x


@pytest.mark.parametrize("name", SEEDS)
def test_seed_model_plans_on_a_gpu(name, tiny):
    """Planned on a simulated V100 with 70% of plain's peak (one pass per step, a short search), the
    plan fits where plain does not."""
    path = str(EXAMPLES / f"{name}.py")
    cl = Cluster.for_gpus(1, "v100-16gb")
    g = GraphSource(resolve_spec(path), cl)(BATCH)
    plain = max(Simulator(g, cl).evaluate(Strategy.single(g.n)).peak_bytes)
    # the usable memory (after the 10% headroom) is 70% of plain's peak
    p = plan(path, cluster=cl.with_memory(int(0.7 * plain / 0.9)), batch_size=BATCH, iterations=300,
             max_microbatches=1)
    assert p.fits and not p.baselines["dp/m1"].fits, (name, p.strategy.summary())
    assert p.strategy.microbatches == 1


@pytest.mark.skipif(os.environ.get("MEMFLOW_SEED_RUNS") != "1", reason="set MEMFLOW_SEED_RUNS=1 (minutes)")
@pytest.mark.parametrize("name", SEEDS)
def test_seed_model_plans_and_runs(name, tiny):
    """Planned on cpu-2 with 60% of plain data parallel's peak per device (a 1 s search): the plan
    fits, runs two steps under its capacity without running out of memory, its losses are finite,
    and no rank's measured peak is above its prediction by more than 1%."""
    r = planned_run(EXAMPLES / f"{name}.py", 0.6, batch=BATCH, compare_losses=False)
    assert r["fits"], (name, r["summary"])
    assert not r["oom"], f"{name}: {r['summary']} predicted to fit: {r['oom']}"
    assert r["losses"] and all(math.isfinite(x) for x in r["losses"])
    for x in r["ranks"]:
        assert x.measured_peak_bytes <= 1.01 * x.predicted_peak_bytes, (name, r["summary"], x)


def test_deep_resnet_groups_keep_the_network(tiny, monkeypatch):
    """``MEMFLOW_DEEP_RESNET_GROUP`` changes the module tree only: the same parameters, the same output."""
    import torch

    monkeypatch.setenv("MEMFLOW_DEEP_RESNET_LAYERS", "62")  # 10 third-stage blocks
    outs = []
    for g in ("1", "4"):
        monkeypatch.setenv("MEMFLOW_DEEP_RESNET_GROUP", g)
        m = _load("resnet_deep")
        torch.manual_seed(0)
        model = m.build_model().eval()
        x, _ = m.example_batch(2)
        outs.append((sum(p.numel() for p in model.parameters()), model(x), len(model.layer3)))
    assert outs[0][0] == outs[1][0] and torch.allclose(outs[0][1], outs[1][1])
    assert (outs[0][2], outs[1][2]) == (10, 4)  # the first block, then groups of 4, 4 and 1


def test_allocator_rounding_is_bounded(tiny):
    """The seeds bench's 512-byte rounding of a plain peak adds at most 511 bytes per storage the step
    can hold (buffers, and per parameter itself and two AdamW tensors and a step, the batch's inputs)."""
    from bench.bench_seeds import rounded_plain_peak

    cl = Cluster.for_gpus(1, "v100-16gb")
    g = GraphSource(resolve_spec(str(EXAMPLES / "resnet50.py")), cl)(8)
    counted, rounded = rounded_plain_peak("resnet50", {"MEMFLOW_EXAMPLE_SCALE": "tiny"}, "v100-16gb", 8)
    assert counted > 0 and counted <= rounded
    assert rounded - counted <= 511 * (len(g.buffers) + 4 * len(g.params) + max(1, len(g.inputs)))
