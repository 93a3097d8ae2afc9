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


def _values_at_init_file(tmp_path):
    """A model whose constructor reads values (stochastic-depth rates from ``linspace(...).tolist()``, as
    HF's ConvNeXt and timm's models do), with a tied weight and a buffer of values it uses."""
    f = tmp_path / "values_at_init.py"
    f.write_text('''
import torch
from torch import nn
BATCH_SIZE = 4
class M(nn.Module):
    def __init__(self):
        super().__init__()
        rates = torch.linspace(0, 0.1, 3, device="cpu").tolist()  # Python floats from a tensor
        self.scale = [1.0 - r for r in rates]
        self.emb = nn.Embedding(16, 8)
        self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in rates)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.emb.weight  # tied
        self.register_buffer("pos", torch.arange(6, dtype=torch.float32).unsqueeze(-1) / 6)
    def forward(self, x):
        h = self.emb(x) + self.pos
        for s, b in zip(self.scale, self.blocks):
            h = h + s * torch.relu(b(h))
        return self.head(h)
def build_model():
    return M()
def example_batch(b):
    x = torch.randint(0, 16, (b, 6), generator=torch.Generator().manual_seed(0))
    return x, x
def loss_fn(out, y):
    return nn.functional.cross_entropy(out.reshape(-1, 16), y.reshape(-1))
''')
    return f


def test_a_model_that_reads_values_at_init_captures_in_fake_mode_as_with_real_tensors(tmp_path):
    """The fake build falls back to the meta device (memflow.graph.fakebuild): the graph traced with
    fake tensors has every node's saved, parameter, output and transient bytes of the one traced on real tensors,
    and the tied weight stays one parameter."""
    from memflow.graph.fakebuild import build_fake
    from memflow.model_file import load_model_file
    from memflow.profile.build import capture_graph, capture_graphs

    spec = load_model_file(_values_at_init_file(tmp_path))
    with pytest.raises(Exception, match="DataDependent|local_scalar_dense|tolist"):
        with FakeTensorMode(allow_non_fake_inputs=True), quiet_fake():
            spec.build()  # (the plain fake build; if this stops raising, the fallback is not needed)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    m = build_fake(spec, mode)
    assert m.head.weight is m.emb.weight and len(list(m.parameters())) == 7
    real = capture_graph(spec, 4, measure=True, repeats=0)
    rows = lambda g: [(n.name, n.saved_bytes, n.param_bytes, n.out_bytes, n.fwd_transient_bytes, n.bwd_transient_bytes)  # noqa: E731
                      for n in g.nodes]
    assert rows(capture_graph(spec, 4)) == rows(real)
    assert rows(capture_graphs(spec, [4, 2])[4]) == rows(real)


def test_hf_convnext_plans_for_a_named_gpu(monkeypatch):
    import memflow

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    p = memflow.plan(str(ROOT / "tests" / "models" / "convnext.py"), gpus=2, gpu_type="a100-80gb", iterations=20,
                     cache=False)
    assert p.predicted.fits
