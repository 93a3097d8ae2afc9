"""The CUDA paths, on a GPU (skipped without one).

One rank per GPU with NCCL: planned training equals plain eager training on
the same GPU (keep, recompute, swap through pinned host buffers on a side
stream, the optimizer stepped on the host, parameters on the host gathered per node as FSDP does,
micro-batching); swapping lowers
the caching allocator's peak as well as the accounted one; costs measured
with CUDA events give a task graph whose liveness replay is the accounted
peak of the executor's run.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memflow.executor import RunConfig, plain_losses, run_plan
from memflow.strategy import RECOMPUTE, SWAP, Strategy

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

ROOT = Path(__file__).resolve().parents[1]
EX = {m: str(ROOT / "examples" / f"{m}.py") for m in ("gpt2", "resnet", "lstm")}
NODES = {"gpt2": 7, "resnet": 7, "lstm": 4}
B = 8
# GPU kernels reduce in a different order from run to run (atomics in embedding and
# convolution backward); a dropped or doubled gradient moves the loss far more than this
RTOL = 1e-4


@pytest.fixture(autouse=True)
def _tiny(monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


_PLAIN: dict = {}


def plain(model: str, steps: int, dtype: str = "fp32") -> list[float]:
    if (model, steps, dtype) not in _PLAIN:
        _PLAIN[(model, steps, dtype)] = plain_losses(EX[model], B, steps, seed=0, device="cuda", dtype=dtype)
    return _PLAIN[(model, steps, dtype)]


def run(model: str, st: Strategy, steps: int = 3, batch: int = B, **kw) -> dict:
    cfg = RunConfig(model_file=EX[model], batch_size=batch, strategy=st.to_dict(), steps=steps, device="cuda", **kw)
    return run_plan(cfg, nproc=1, timeout_s=300)


CASES = {
    "keep": dict(),
    "recompute": dict(actions="recompute"),
    "swap": dict(actions="swap"),
    "swap-m2": dict(actions="swap", microbatches=2),
    "swap-prefetch3": dict(actions="swap", prefetch=3),  # copies back started three nodes ahead
    "mixed-host-opt": dict(actions="mixed", optimizer_on_host=[True]),
    "bf16-swap": dict(actions="swap", dtype="bf16"),
    "host-opt": dict(optimizer_on_host=[True]),
    # FSDP's program at dp 1: every node's parameters live on the host (pinned), copied in on a side
    # stream before each pass and freed after it; the optimizer steps them there
    "params-host": dict(sharding=["parameters"], optimizer_on_host=[True], params_on_host=[True]),
    "params-host-recompute": dict(actions="recompute", sharding=["parameters"], optimizer_on_host=[True],
                                  params_on_host=[True]),
    # ... in bf16: the weights autocast casts are rounded on the host into a pinned buffer and copied into
    # a bf16 gather (memflow.executor.zero3), with and without a recompute's replay reading it
    "params-host-bf16": dict(sharding=["parameters"], optimizer_on_host=[True], params_on_host=[True], dtype="bf16"),
    "params-host-bf16-recompute": dict(actions="recompute", sharding=["parameters"], optimizer_on_host=[True],
                                       params_on_host=[True], dtype="bf16"),
}


# every case on GPT-2; the others where their layers differ (BatchNorm, LSTM workspaces)
RUNS = [("gpt2", c) for c in sorted(CASES)] + [("resnet", c) for c in ("keep", "swap", "mixed-host-opt")] + [
    ("lstm", c) for c in ("keep", "swap-m2", "mixed-host-opt")]


@pytest.mark.parametrize("model,case", RUNS)
def test_cuda_run_equals_plain_training(model, case):
    kw = dict(CASES[case])
    acts = kw.pop("actions", "keep")
    dtype = kw.pop("dtype", "fp32")
    if acts == "mixed":
        acts = [(SWAP, RECOMPUTE, "keep")[k % 3] for k in range(NODES[model])]
    else:
        acts = [acts] * NODES[model]
    st = Strategy.from_boundaries(NODES[model], [], dp=1, actions=acts, **kw)
    res = run(model, st, dtype=dtype)
    assert res.backend == "nccl"
    ref = plain(model, len(res.losses), dtype)
    worst = max(abs(a - b) / abs(b) for a, b in zip(res.losses, ref))
    assert worst <= RTOL, (res.losses, ref)
    r = res.ranks[0]
    assert r.cuda_peak_allocated_bytes > 0


def test_cuda_swap_lowers_allocator_and_accounted_peak():
    # a batch at which activations, not the model state, make the peak
    keep = run("gpt2", Strategy.single(NODES["gpt2"]), batch=256).ranks[0]
    swap = run("gpt2", Strategy.single(NODES["gpt2"], action=SWAP), batch=256).ranks[0]
    assert swap.measured_peak_bytes < keep.measured_peak_bytes
    assert swap.cuda_peak_allocated_bytes < keep.cuda_peak_allocated_bytes
    # the swapped-out copies are host bytes, not device bytes
    assert swap.host_peak_bytes > keep.host_peak_bytes


def test_cuda_measured_profile_replays_the_executors_peak():
    from memflow.graph.record import replay
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model

    g = profile_model(load_model_file(EX["gpt2"]), B, device="h100-80gb", measure=True, cache=False)
    assert g.time_source == "measured" and g.device == "cuda"
    assert all(nd.fwd_time_s > 0 and nd.bwd_time_s > 0 for nd in g.nodes)
    ran = run("gpt2", Strategy.single(g.n), steps=4).ranks[0]
    assert abs(replay(g).peak_bytes / ran.measured_peak_bytes - 1) <= 0.02, (replay(g).peak_bytes, ran)


def test_cpu_plan_runs_on_cpu_even_with_a_gpu():
    cfg = RunConfig(model_file=EX["lstm"], batch_size=B, strategy=Strategy.single(NODES["lstm"]).to_dict(),
                    steps=2, device="cpu")
    res = run_plan(cfg, nproc=1, timeout_s=300)
    assert res.backend == "gloo"
    assert res.ranks[0].cuda_peak_allocated_bytes is None  # (no CUDA figures for a CPU rank)


def test_plan_measured_on_this_gpu_runs_as_predicted(tmp_path):
    import memflow

    p = memflow.plan(EX["gpt2"], gpus=1, gpu_type="h100-80gb", batch_size=B, measure=True, cache=False,
                     time_budget_s=2)
    assert p.settings.measure and p.settings.cost_source == "measured"
    p.save(tmp_path / "p.yaml")
    res = memflow.run(tmp_path / "p.yaml", steps=4)
    r = res.ranks[0]
    assert res.backend == "nccl"
    assert abs(r.predicted_peak_bytes / r.measured_peak_bytes - 1) <= 0.05, r


@pytest.mark.parametrize("action", ["keep", SWAP])
def test_cuda_reserved_memory_is_the_predicted_live_peak_in_pages(action):
    # the executor's allocator maps expandable segments: reserved = live peak + workspaces, in pages
    from memflow.cluster import Cluster
    from memflow.gpumem import CONTEXT_BYTES, reserved_bytes
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model
    from memflow.simulator import Simulator

    st = Strategy.single(NODES["gpt2"], action=action)
    g = profile_model(load_model_file(EX["gpt2"]), 256, device="h100-80gb", cache=False)
    live = Simulator(g, Cluster.for_gpus(1, "h100-80gb")).evaluate(st).peak_bytes[0]
    r = run("gpt2", st, batch=256).ranks[0]
    assert r.cuda_alloc_conf == "expandable_segments:True"
    assert abs(reserved_bytes(live) / r.cuda_peak_reserved_bytes - 1) <= 0.05, (live, r)
    assert r.cuda_peak_reserved_bytes + CONTEXT_BYTES < torch.cuda.get_device_properties(0).total_memory
