"""A fake trace for a GPU casts as CUDA's autocast does (memflow.graph.gpu_autocast).

The rules are PyTorch's op lists (``aten/src/ATen/autocast_mode.h``); on a GPU the same ops are
checked against real CUDA autocast (skipped without one)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from memflow.graph.training import autocast, gpu_semantics

BF, F32 = torch.bfloat16, torch.float32
ROOT = Path(__file__).resolve().parents[1]


def _ops(x: torch.Tensor, w: torch.Tensor, v: torch.Tensor, vol: torch.Tensor) -> dict[str, torch.dtype]:
    """Each op's output dtype, on a bf16 ``x`` and fp32 ``w``/``v``/``vol``."""
    return {
        "linear": F.linear(v, w).dtype,  # lower precision everywhere
        "pow": torch.pow(x, 3).dtype,  # CUDA: fp32 list
        "pow (aten overload)": torch.ops.aten.pow.Tensor_Scalar(x, 3).dtype,
        "exp": x.exp().dtype,
        "rsqrt": torch.rsqrt(x).dtype,
        "layer_norm": F.layer_norm(x, x.shape[-1:]).dtype,
        "softmax": torch.softmax(x, -1).dtype,  # CUDA: fp32_set_opt_dtype
        "log_softmax (aten overload)": torch.ops.aten.log_softmax.int(x, -1).dtype,
        "sum": x.sum().dtype,
        "softmax with a dtype given": torch.softmax(x, -1, dtype=BF).dtype,
        "mv": torch.mv(w, v[0]).dtype,  # CUDA: lower precision; not a CPU autocast op
        "gelu": F.gelu(x).dtype,  # no list: its input's dtype
        "integer sum": torch.ones(3, dtype=torch.long).sum().dtype,
    }


CUDA_RULES = {"linear": BF, "pow": F32, "pow (aten overload)": F32, "exp": F32, "rsqrt": F32, "layer_norm": F32,
              "softmax": F32, "log_softmax (aten overload)": F32, "sum": F32, "softmax with a dtype given": BF,
              "mv": BF, "gelu": BF, "integer sum": torch.long}


def _inputs(device="cpu"):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=g).to(device=device, dtype=BF)
    w = torch.randn(8, 8, generator=g).to(device)
    v = torch.randn(4, 8, generator=g).to(device)
    vol = torch.randn(1, 1, 4, 4, 4, generator=g).to(device)
    return x, w, v, vol


def test_a_gpu_trace_casts_by_cudas_lists():
    with gpu_semantics(), autocast("bf16", "cpu"):
        got = _ops(*_inputs())
    assert got == CUDA_RULES


def test_ops_the_cpu_casts_to_fp32_and_cuda_does_not_keep_the_cpus_cast():
    """(3-D pooling: CUDA runs it in bf16; the emulation keeps the CPU's fp32 cast, an over-count of a bf16
    3-D CNN's memory, never an under-count)"""
    vol = _inputs()[3].to(BF)
    with gpu_semantics(), autocast("bf16", "cpu"):
        assert F.max_pool3d(vol, 2).dtype == F32


def test_the_cpus_own_autocast_is_untouched_outside_a_gpu_trace():
    # (the difference the emulation exists for: on the CPU these stay bf16 or go fp32 by the CPU's lists)
    with autocast("bf16", "cpu"):
        got = _ops(*_inputs())
    assert got["pow"] == BF and got["layer_norm"] == BF and got["softmax"] == BF and got["sum"] == BF
    assert got["mv"] == F32 and got["linear"] == BF
    with gpu_semantics(False), autocast("bf16", "cpu"):
        assert torch.pow(_inputs()[0], 3).dtype == BF


def test_autocast_turned_off_inside_is_respected():
    x = _inputs()[0]
    with gpu_semantics(), autocast("bf16", "cpu"):
        with torch.autocast("cpu", enabled=False):
            assert torch.pow(x, 3).dtype == BF and torch.softmax(x, -1).dtype == BF


def test_casts_are_autograd_visible_so_the_backward_saves_fp32():
    """pow's backward saves its input: under CUDA's rules that is the fp32 cast of the bf16 input."""
    x = torch.randn(4, 8, dtype=BF, requires_grad=True)
    saved = []

    def pack(t):
        saved.append(t.dtype)
        return t

    with gpu_semantics(), autocast("bf16", "cpu"), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = torch.pow(x, 3)
    assert y.dtype == F32 and F32 in saved and BF not in saved
    y.sum().backward()
    assert x.grad.dtype == BF


def test_a_profile_for_a_gpu_saves_what_cuda_saves(tmp_path, monkeypatch):
    """GPT-2's GELU is ``pow(x, 3)`` on a bf16 linear output: traced for a GPU it keeps fp32 tensors for its
    backward, more bytes than the same trace with the CPU's autocast (measured on an H200: the CPU-semantics
    trace was 15.4% under the run's peak, the GPU-semantics one within 0.01%, BENCHMARKS.md's GPU section)."""
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model
    import memflow.profile as prof

    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = load_model_file(ROOT / "examples" / "gpt2.py")
    gpu = profile_model(spec, 4, device="h100-80gb", dtype="bf16", cache=False)
    monkeypatch.setattr(prof, "gpu_semantics", lambda on=True: gpu_semantics(False))
    cpu_rules = profile_model(spec, 4, device="h100-80gb", dtype="bf16", cache=False)
    blocks = [k for k, nd in enumerate(gpu.nodes) if ".h." in nd.name]
    assert blocks
    for k in blocks:
        assert gpu.nodes[k].saved_bytes > cpu_rules.nodes[k].saved_bytes, gpu.nodes[k].name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_rules_are_cudas_own():  # pragma: no cover - needs a GPU
    with torch.autocast("cuda", dtype=BF):
        got = _ops(*_inputs("cuda"))
    assert got == CUDA_RULES


@pytest.mark.parametrize("model", ["gpt2", "bert"])
def test_the_capture_bakes_no_cast_in(model, monkeypatch):
    """The rules apply where the trace runs the program, never inside the export that makes it: a program
    captured for a GPU is the executor's (same ops per node, so the plan's fingerprint is the one
    ``memflow run`` checks; both models' blocks gained casts before this was guarded)."""
    from memflow.graph.build import capture_program, fingerprint
    from memflow.model_file import load_model_file

    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = load_model_file(ROOT / "examples" / f"{model}.py")
    got = []
    for on in (False, True):
        with gpu_semantics(on):
            captured, _, _, built = capture_program(spec, 4, dtype="bf16")
        got.append((captured.op_counts, fingerprint(built, captured, 4, "bf16", "auto")))
    assert got[0] == got[1]


def test_a_to_after_an_op_cuda_keeps_in_fp32_traces_for_a_gpu(tmp_path):
    """``torch.export`` checks the dtype of a ``.to()``'s input as the CPU's autocast made it; a trace for
    a GPU runs CUDA's rules, where ``norm`` gives fp32: HF's CLIP (``image_embeds.t().to(device)`` after a
    norm) failed every bf16 profile for a GPU with "Tensor dtype mismatch"."""
    from memflow.graph.build import capture_program
    from memflow.graph.capture import assert_meta
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model

    path = tmp_path / "normed.py"
    path.write_text(
        "import torch\nfrom torch import nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__(); self.a = nn.Linear(8, 8); self.b = nn.Linear(8, 8)\n"
        "    def forward(self, x, y):\n"
        "        h = self.a(x)\n        h = h / h.norm(dim=-1, keepdim=True)\n"
        "        g = self.b(y)\n        return (g @ h.t().to(y.device)).logsumexp(-1).mean()\n"
        "def build_model():\n    return Net()\n"
        "def example_batch(b):\n    return {'x': torch.randn(b, 8), 'y': torch.randn(b, 8)}\n")
    spec = load_model_file(path)
    with gpu_semantics(False):
        _, prog, _, _ = capture_program(spec, 4, dtype="bf16")
    checks = [nd for c in prog.calls for nd in c.module.graph.nodes if nd.target is assert_meta]
    assert checks and checks[0].kwargs["dtype"] == BF  # the CPU's autocast made the input bf16
    g = profile_model(spec, 4, device="h100-80gb", dtype="bf16", cache=False)
    assert g.n >= 1 and all(nd.saved_bytes >= 0 for nd in g.nodes)
