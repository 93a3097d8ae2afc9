"""GPU memory as the caching allocator reserves it (memflow.gpumem), and where the executor shows it.

The rules are PyTorch's documented allocator rules; whether they hold on a GPU is measured by
``python -m bench gpu`` and tests/test_gpu.py. Here: the rules as stated, the executor's allocator
setting, and the run report's columns, without a GPU."""
from __future__ import annotations

import random

import pytest

from memflow.executor.launch import cuda_alloc_conf
from memflow.executor.report import RankReport, RunReport, format_report
from memflow.gpumem import CONTEXT_BYTES, CUBLAS_HANDLES, LARGE_PAGE, SMALL_PAGE, cublas_workspace_bytes, \
    device_bytes, reserved_bytes

MIB = 2**20


def test_reserved_is_the_live_peak_and_workspaces_in_large_pages_plus_a_small_page():
    rng = random.Random(0)
    for _ in range(200):
        live, ws = rng.randrange(0, 80 * 2**30), rng.choice([0, 8 * MIB + 128 * 1024, 32 * MIB])
        r = reserved_bytes(live, ws) - SMALL_PAGE
        need = live + CUBLAS_HANDLES * ws
        assert r % LARGE_PAGE == 0 and need <= r < need + LARGE_PAGE
        assert device_bytes(live, ws) == r + SMALL_PAGE + CONTEXT_BYTES
    # PyTorch's default workspace: :4096:8 on Hopper, :4096:2:16:8 elsewhere
    assert cublas_workspace_bytes(9) == 32 * MIB and cublas_workspace_bytes(8) == 8 * MIB + 128 * 1024


def test_the_ranks_map_expandable_segments_unless_the_user_chose():
    env: dict[str, str] = {}
    cuda_alloc_conf(env)
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        mine = {name: "max_split_size_mb:128"}
        cuda_alloc_conf(mine)
        assert mine == {name: "max_split_size_mb:128"}


def _report(**cuda) -> RunReport:
    rank = RankReport(rank=0, stage=0, dp_rank=0, nodes=[0, 3], measured_peak_bytes=100 * MIB, peak_at="",
                      host_peak_bytes=0, predicted_peak_bytes=100 * MIB, measured_step_time_s=0.1,
                      predicted_step_time_s=0.1, **cuda)
    return RunReport(model_file="m.py", batch_size=8, microbatch_size=8, world_size=1, strategy={},
                     node_names=["a", "b", "c"], first_step=0, steps=[0], losses=[1.0], backend="nccl",
                     capacity_bytes=None, measured_step_time_s=0.1, predicted_step_time_s=0.1, ranks=[rank])


def test_a_gpu_run_reports_reserved_memory_beside_its_prediction():
    text = format_report(_report(cuda_peak_allocated_bytes=165 * MIB, cuda_peak_reserved_bytes=200 * MIB,
                                 cuda_predicted_reserved_bytes=190 * MIB))
    head, row = text.splitlines()[:2]
    assert "reserved predicted" in head
    assert row.split()[-5:] == ["200.00", "MiB", "190.00", "MiB", "-5.0%"]
    assert "reserved" not in format_report(_report()).splitlines()[0]  # a CPU run has no allocator view


def test_a_gpu_plan_says_what_the_device_holds_and_when_it_is_over():
    from memflow.summary import gpu_memory_line

    under = gpu_memory_line(4 * 2**30, 16 * 2**30)
    assert "OVER" not in under and "of 16.0 GiB" in under
    # a live peak that fits the device but not with the context and the allocator's share beside it
    over = gpu_memory_line(16 * 2**30 - 100 * MIB, 16 * 2**30)
    assert "OVER the device by" in over
    # fits by the rules, but not with holes as large as the worst the H200 showed (recompute-all: 11.2%)
    tight = gpu_memory_line(int(0.9 * 16 * 2**30), 16 * 2**30)
    assert "OVER" not in tight and "holes as large as measured" in tight
    assert "holes" not in under


# ------------------------------------------------ a GPU plan's reserved peak from a fake run (memflow.reserved)
def _tiny_gpt2(monkeypatch):
    from pathlib import Path

    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return str(Path(__file__).resolve().parents[1] / "examples" / "gpt2.py")


def test_a_one_gpu_plan_carries_the_allocators_reserved_peak(monkeypatch, tmp_path):
    """A plan for one GPU that the fake run covers records the allocator model's reserved peak of its own
    step (the same figure plan_reserved gives), at or above its live peak, and its summary uses it; a plan
    over two GPUs, which it does not cover, records none and keeps the live-peak line."""
    import memflow
    from memflow.model_file import load_model_file
    from memflow.reserved import not_covered, plan_reserved
    from memflow.summary import summary

    model = _tiny_gpt2(monkeypatch)
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path))
    for offload in ("none", "optimizer+parameters"):  # (the parameters streamed from the host too)
        p = memflow.plan(model, gpus=1, gpu_type="h100-80gb", offload=offload, iterations=200)
        assert not_covered(p.strategy) == "" and p.strategy.params_host(0) is (offload != "none")
        assert set(p.strategy.actions) == {"keep"}  # (80 GB: nothing to swap or recompute)
        (r,) = p.predicted.reserved_bytes
        with memflow.planner.plan_environment(p):
            assert r == plan_reserved(load_model_file(model), p.strategy, p.batch_size, device_name="h100-80gb")
        assert r >= max(p.predicted.peak_bytes) + 2 * cublas_workspace_bytes(9)
        assert "from a fake run of the step" in summary(p)
    two = memflow.plan(model, gpus=2, gpu_type="h100-80gb", iterations=200)
    assert two.predicted.reserved_bytes == [] and "from a fake run" not in summary(two)


def test_a_plan_whose_reserved_peak_is_over_the_device_does_not_fit(monkeypatch, tmp_path):
    """The live peak fits (no headroom asked), but the reserved peak and the CUDA context do not: the plan
    is made again with less memory, and where nothing can come under the device it says it does not fit,
    with a one-line reason naming the reserved peak."""
    import memflow
    from memflow.summary import infeasible_message

    model = _tiny_gpt2(monkeypatch)
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path))
    notes: list[str] = []
    mem = CONTEXT_BYTES + 40 * MIB  # (below the two cuBLAS workspaces and a page of the large pool)
    p = memflow.plan(model, gpus=1, gpu_type="h100-80gb", gpu_memory=mem, headroom=0.0, offload="none",
                     iterations=200, progress=notes.append)
    assert max(p.predicted.peak_bytes) <= mem  # (the simulator alone would say it fits)
    assert not p.fits and p.predicted.reserved_bytes[0] + CONTEXT_BYTES > mem
    assert "caching allocator's reserved peak" in infeasible_message(p)
    roomy = memflow.plan(model, gpus=1, gpu_type="h100-80gb", gpu_memory=mem + 200 * MIB, headroom=0.0,
                         offload="none", iterations=200)
    assert roomy.fits and roomy.predicted.reserved_bytes[0] + CONTEXT_BYTES <= mem + 200 * MIB


@pytest.mark.full
def test_a_plan_over_the_device_by_its_reserved_peak_is_made_again_with_less(monkeypatch, tmp_path):
    """GPT-2 small at batch 8 on a 15 GiB GPU with 2% headroom: the fastest plan keeps every activation
    (live peak 14.3 GiB, under the 14.7 usable) but reserves 14.4 GiB beside a 0.7 GiB context; planned
    again with its live peak lowered by the excess, the plan fits the device, reserved peak included."""
    import memflow

    _tiny_gpt2(monkeypatch)
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "full")
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path))
    from pathlib import Path

    notes: list[str] = []
    mem = 15 * 2**30
    p = memflow.plan(str(Path(__file__).resolve().parents[1] / "examples" / "gpt2.py"), gpus=1,
                     gpu_type="v100-16gb", gpu_memory=mem, headroom=0.02, progress=notes.append)
    assert any("planning again" in n for n in notes)
    assert p.fits and p.predicted.reserved_bytes[0] + CONTEXT_BYTES <= mem
    assert p.settings.headroom > 0.02


def test_a_gpu_is_known_by_a_whole_word_of_its_name():
    from memflow.reserved import SMS, gpu_figures

    assert gpu_figures("NVIDIA H200") == (9, SMS["h200"]) and gpu_figures("a100-40gb") == (8, SMS["a100"])
    assert gpu_figures("NVIDIA GeForce RTX 4090") == (8, SMS["rtx-4090"]) and gpu_figures("titan-x-12gb")[0] == 5
    assert gpu_figures("NVIDIA L40S") == (9, SMS["h100"])  # (not an L4: the default)


def test_the_cli_says_in_one_line_that_the_reserved_peak_does_not_fit(monkeypatch, tmp_path, capsys):
    """`memflow plan` whose every plan's reserved peak and CUDA context exceed the device: exit code 3
    (nothing fits) and one line naming the reserved peak, after the summary; no traceback."""
    from memflow.cli.main import main

    model = _tiny_gpt2(monkeypatch)
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    rc = main(["plan", model, "--gpus", "1", "--gpu-type", "h100-80gb", "--gpu-memory",
               f"{(CONTEXT_BYTES + 40 * MIB) // MIB}MiB", "--headroom", "0", "--offload", "none",
               "--iterations", "200", "--quiet"])
    out, err = capsys.readouterr()
    assert rc == 3, err
    assert "DOES NOT FIT" in out and "OVER the device" in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "caching allocator's reserved peak" in lines[0], err
