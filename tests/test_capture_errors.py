"""A model torch.export cannot capture is one line that names the module, not pages of torch's logs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from memflow.cli.main import main
from memflow.profile.build import trace_failed

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "tests" / "bad_models"

CASES = {
    "data_dependent_branch.py": ["data-dependent control flow in module `blocks.0`", "aten.sum",
                                 "data_dependent_branch.py:13", "torch.cond"],
    "bad_batch_shape.py": ["in module `embed`", "aten.linear", "[8, 5] X [4, 8]", "example_batch"],
    # a branch inside library code (HF's loss on the labels' count): the library's line, the op the size came from
    "hf_loss_branch.py": ["data-dependent control flow", "the size of aten.nonzero's result",
                          "modeling_deberta_v2.py:", "compute it outside the model",
                          "define loss_fn(output, labels)"],
    # the RNN over a PackedSequence: what went wrong is torch's, what to change is ours
    "packed_sequence.py": ["in module `rnn` (LSTM)", "packed_sequence.py:13", "pack_padded_sequence",
                           "run the RNN on the padded batch"],
    # a model's own autograd.Function kept whole but for what a custom op cannot do
    "dirty_function.py": ["autograd.Function `InplaceRelu`", "ctx.mark_dirty", "torch.library.custom_op"],
    # sizes only the batch's values decide: the module, the op the size came from, a fixed-shape way to write it
    "routed_experts.py": ["module `moe` (MoE)", "aten.where", "size depends on tensor values",
                          "run every expert on every token"],
    # batch norm's cumulative average (momentum=None): its own step count read, not the batch's values
    "bn_cumulative.py": ["module `1` (BatchNorm1d)", "momentum=None", "num_batches_tracked", "give it a momentum"],
    # a gradient whose size only the ids decide
    "sparse_embedding.py": ["module `emb` (Embedding)", "sparse=True", "build it with sparse=False"],
    # a random draw deciding what runs: which draw, and the setting that removes it
    "layerdrop.py": ["data-dependent control flow", "aten.rand", "LayerDrop", "set its probability to 0"],
    # a branch inside a library model's own code (FSMT's padding mask): the library's line, no torch.cond advice
    "hf_library_branch.py": ["data-dependent control flow in module `model` (FSMTModel)", "modeling_fsmt.py:",
                             "the library's code branches on the batch's values"],
    # CTC over targets concatenated in 1-D: its memory follows the longest target, a value
    "ctc_concat.py": ["aten.ctc_loss", "ctc_concat.py:15", "concatenated in one 1-D tensor", "padded to (batch, longest"],
    # HF Informer: an all-ones mask dropped eagerly is kept when traced, and its ProbSparse attention's own check
    # (a ValueError, no op) fails after the distilling layer halved the sequence
    "bench/outside8/informer.py": ["(InformerProbSparseAttention)", "Attention mask should be of size",
                                   "another path under torch.export than when it runs eagerly"],
    # a custom autograd Function's backward (HF Reformer's reversible layers) failing inside the trace: the node
    # traced and the library's line, where the line said neither
    "bench/outside7/reformer.py": ["tracing the training step failed in reformer.", "at modeling_reformer.py:",
                                   "requires_grad = True", "leaf variables"],
    # a gradient taken inside forward (WGAN-GP): the call and its line, not a hint about .data (real tensors)
    # nor a plan without the inner backward (fake tensors)
    "bench/outside5/grad_penalty.py": ["calls torch.autograd.grad at grad_penalty.py:12", "double backward",
                                       "cannot plan a backward inside the forward"],
}
# real tensors only (a plan from measured costs, and every run): under fake tensors the export keeps it
REAL_ONLY = {
    # a parameter changed through .data in forward: what to write instead
    "data_clamp.py": ["constants", "with torch.no_grad(): p.clamp_(...)", "not through `p.data`"],
}

# fake tensors only (one capture says it): a library's masked path, taken only when traced (HF Nystromformer
# drops an all-ones mask eagerly, where it reads its values, and its masked attention breaks on the shapes)
FAKE_ONLY = {
    # torch's own module branching on values inside itself: no torch.cond to write there; what to use instead
    "bench/outside5/adaptive_softmax.py": ["module `out` (AdaptiveLogSoftmaxWithLoss)",
                                           "torch's AdaptiveLogSoftmaxWithLoss decides",
                                           "a full nn.Linear over the vocabulary and F.cross_entropy"],
    "bench/outside5/nystromformer.py": ["(NystromformerSelfAttention)", "check the shapes example_batch returns",
                                        "another path under torch.export than when it runs eagerly"],
    # expert sizes read from the routing (.tolist()): no values under fake tensors; the node and the way out
    "bench/outside7/jetmoe.py": ["tracing the training step failed in model.layers.0: DataDependentOutputException",
                                 "reads a number from a tensor", "--gpu-type cpu", "a fixed capacity per expert"],
}


@pytest.mark.parametrize("name,gpu,gpus", [(n, g, 1) for n in sorted(CASES) for g in ("v100-16gb", "cpu")]  # fake
                         + [(n, "cpu", 1) for n in sorted(REAL_ONLY)]  # tensors (predicted costs), real (measured)
                         # measured by two timing processes at once: the error one of them raised reaches the CLI
                         # whole, its hint at its end (it was cut at 300 characters)
                         + [("hf_loss_branch.py", "cpu", 2), ("data_clamp.py", "cpu", 2)]
                         + [(n, "v100-16gb", 1) for n in sorted(FAKE_ONLY)])
def test_uncapturable_model_is_one_line(name, gpu, gpus, tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path / "cache"))
    path = BAD / name if "/" not in name else ROOT / name  # (a path: a model written from the outside)
    rc = main(["plan", str(path), "--gpu-type", gpu, "--gpus", str(gpus), "--batch-size", "8"])
    out, err = capfd.readouterr()  # what torch writes to the file descriptors too
    lines = err.strip().split("\n")  # a progress bar redrawn with \r is one line on a terminal
    assert rc == 2, err
    assert len(lines) <= 3, err
    assert lines[-1].startswith("memflow: error: ") and "Traceback" not in err
    for fragment in {**CASES, **REAL_ONLY, **FAKE_ONLY}[name]:
        assert fragment in lines[-1], lines[-1]


TRANSFORMER = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(1))


def build_model():
    return Net()


def example_batch(batch_size):
    return torch.randn(batch_size, 4, 8), torch.randint(0, 2, (batch_size,))


def loss_fn(output, target):
    return nn.functional.cross_entropy(output, target)
'''


def test_transformer_encoder_profiles_without_fake_tensor_warnings(tmp_path):
    """nn.TransformerEncoder deep-copies its layer, which asks the (fake) parameters for their data
    pointers while MemFlow builds the model under fake tensors: torch's warning about that is not the
    user's to see. A fresh process: torch gives the warning once per process."""
    (tmp_path / "enc.py").write_text(TRANSFORMER)
    env = dict(os.environ, MEMFLOW_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    r = subprocess.run([sys.executable, "-m", "memflow", "plan", "enc.py", "--gpus", "2", "--quiet", "-o", "p.yaml"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "FakeTensor" not in r.stderr and "Warning" not in r.stderr, r.stderr[-2000:]


def test_a_bf16_kernel_this_cpu_lacks_is_named_with_the_way_out():
    """oneDNN has no bf16 LSTM on some CPUs (AVX2 alone): plain training fails too, and the error says so."""
    e = RuntimeError("could not create a primitive descriptor for the LSTM forward propagation primitive. "
                     "Run workload with environment variable ONEDNN_VERBOSE=all to get additional diagnostic")
    msg = str(trace_failed("m.py", e, "bf16"))
    assert "\n" not in msg and "LSTM forward propagation primitive (" in msg and "--dtype fp32" in msg
    assert "ONEDNN_VERBOSE" not in msg
    assert "--dtype fp32" not in str(trace_failed("m.py", e, "fp32"))


BF16_LSTM = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 8, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0].float().pow(2).mean()


def build_model():
    return Net()


def example_batch(batch_size):
    return {"x": torch.randn(batch_size, 5, 8)}
'''


def _cpu_runs_bf16_lstm() -> bool:
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.nn.LSTM(8, 8)(torch.randn(5, 2, 8))
    except RuntimeError:
        return False
    return True


@pytest.mark.skipif(_cpu_runs_bf16_lstm(), reason="this CPU has oneDNN's bf16 LSTM: nothing fails")
def test_a_bf16_kernel_this_cpu_lacks_is_one_line_in_the_cli(tmp_path, capfd, monkeypatch):
    """On a CPU with AVX2 alone (CI's): a bf16 LSTM's step fails as plain training's does, in one line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "m.py").write_text(BF16_LSTM)
    rc = main(["plan", "m.py", "--cluster", "cpu-1", "--dtype", "bf16", "--batch-size", "4"])
    err = capfd.readouterr().err.strip().split("\n")
    assert rc == 2 and err[-1].startswith("memflow: error: ") and "Traceback" not in "\n".join(err)
    assert "LSTM forward propagation primitive (" in err[-1] and "--dtype fp32" in err[-1], err[-1]
