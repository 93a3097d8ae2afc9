"""Plans run on a twelfth round of models written from the outside, as ``python -m bench outside`` runs
its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside12``:

a DenseNet-BC in its memory-efficient form (each dense layer's concatenation and 1x1 bottleneck run under
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` called inside the model's own forward,
BatchNorm, in-place ReLU in the transitions), HF DistilBERT for sequence classification with labels and
its dropout left on, HF Falcon in its original layout (parallel attention and MLP, multi-query attention,
rotary, tied embeddings), an order-2 Hyena language model (implicit long filters made in forward by a
sine MLP with an exponential decay window, FFT convolution with ``torch.fft.rfft``/``irfft``, short causal
depthwise convs, elementwise gates), an MLP-Mixer (token-mixing MLPs over the transposed patches), a
ResNeXt with grouped 3x3 convs, BatchNorm, in-place ReLU and ``out += shortcut``, an xLSTM-style sLSTM
language model (a Python loop over time with exponential gating and a log-space stabiliser, states frozen
past each sequence's length with ``torch.where``, padded embeddings zeroed with ``x[~mask] = 0.0``), and
an image captioner with torch's own ``nn.TransformerDecoder`` (``norm_first``, dropout on, a boolean causal
mask and a padding mask) cross-attending to a convolutional encoder's memory.

``python -m bench outside12``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside12").glob("*.py"))
BATCH_NORM = {"densenet_ckpt", "resnext_grouped"}
RANDOM = {"distilbert_cls", "tdecoder_caption"}  # dropout masks drawn in forward
STATEFUL: set = set()
PER_MICROBATCH: set = set()
# the loss is a mean over each micro-batch's own unpadded targets (-100 elsewhere), and the micro-batches hold
# different numbers of them: at the initial weights the mean of the per-part losses is 3.08e-03 (sLSTM, 2 parts)
# and 2.50e-04 (Falcon, 4 parts) off the whole batch's, what data-parallel or accumulated training computes
OWN_TOKENS = "a mean over each micro-batch's own unpadded targets, as data-parallel training's"
NOISY = {"slstm_masked": OWN_TOKENS, "falcon": OWN_TOKENS}


def main() -> None:
    run_models(MODELS, "outside12", "Plans run on models written from the outside: a twelfth round",
               "python -m bench outside12", BATCH_NORM, RANDOM, STATEFUL, PER_MICROBATCH, NOISY)
