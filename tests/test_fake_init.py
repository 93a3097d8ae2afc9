"""Models whose ``__init__`` reads its tensors' values build in fake mode (what every prediction for
a named GPU captures under): torch's truncated-normal init (``.item()`` and a rejection loop), called
by HF's ViT/DeiT/Swin and timm's models, leaves a fake tensor as it is, and a real one as torch does."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from memflow.graph.diagnose import quiet_fake

ROOT = Path(__file__).resolve().parents[1]


class _TruncInit(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        nn.init.trunc_normal_(self.lin.weight, std=0.02)

    def forward(self, x):
        return self.lin(x)


def test_trunc_normal_in_fake_mode_needs_the_context():
    with FakeTensorMode(allow_non_fake_inputs=True):
        with pytest.raises(Exception, match="local_scalar_dense|data.dependent|DataDependent"):
            _TruncInit()  # (torch's own: if this stops raising, the context is no longer needed)
        with quiet_fake():
            m = _TruncInit()
    assert tuple(m.lin.weight.shape) == (8, 8)


def test_real_tensors_keep_torchs_truncated_normal_inside_the_context():
    torch.manual_seed(0)
    ref = _TruncInit().lin.weight.detach().clone()
    torch.manual_seed(0)
    with quiet_fake():
        got = _TruncInit().lin.weight.detach()
    assert torch.equal(ref, got) and ref.abs().max() <= 2.0 and ref.std() < 0.05
    assert torch.nn.init._no_grad_trunc_normal_.__module__ == "torch.nn.init"  # restored after it


def test_hf_vit_plans_for_a_named_gpu(monkeypatch):
    """HF's ViT (truncated-normal init, a patch convolution, a CLS token) captured in fake mode."""
    import memflow

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    p = memflow.plan(str(ROOT / "tests" / "models" / "vit.py"), gpus=2, gpu_type="a100-80gb", iterations=20,
                     cache=False)
    assert p.predicted.fits and len(p.node_names) >= 3
