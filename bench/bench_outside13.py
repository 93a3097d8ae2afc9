"""Plans run on a thirteenth round of models written from the outside, as ``python -m bench outside`` runs
its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside13``:

HF BART for summarisation (tied embeddings, dropout everywhere, labels shifted inside), a capsule network with
dynamic routing (an einsum with a root-level transformation weight, three routing iterations with the
predictions detached in all but the last) and a reconstruction decoder, HF ConvBERT for masked language
modelling (span-based dynamic convolution heads beside self-attention, grouped feed-forward, an embedding
projection), HF DeBERTa-v2 (disentangled relative attention; not captured: a data-dependent ``nonzero``), an
EfficientNet-B0-like CNN (MBConv blocks, squeeze-and-excitation, in-place SiLU, stochastic depth drawn per
sample in forward), HF Gemma-2 with sliding-window and soft-capped attention, a CNN writing into slices of its
activations in place (``h[:, :8] = torch.tanh(h[:, :8])``, ``mul_`` on a slice, ``add_``, ``relu_``), a
character LM unrolling one ``nn.LSTMCell`` 24 times with variational dropout and a tied decoder, HF Mamba
(v1) on its slow path (a Python scan over tokens), HF Qwen2-MoE (top-2 of 4 experts, a gated shared expert,
the router's load-balancing loss), HF RegNetY (grouped convs, squeeze-and-excitation), an RNN-Transducer's
joint network (a broadcast sum of encoder and prediction projections, the step's largest tensor), and HF
Wav2Vec2 for CTC (not captured: the labels' maximum read in Python).

``python -m bench outside13``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside13").glob("*.py"))
BATCH_NORM = {"effnet_se", "regnet_hf", "inplace_slices"}
RANDOM = {"bart_summ", "convbert_mlm", "lstmcell_loop"}  # dropout masks drawn in forward (EfficientNet's too)
STATEFUL: set = set()
PER_MICROBATCH = {"qwen2_moe"}  # the router's load-balancing loss over each micro-batch's routing


def main() -> None:
    run_models(MODELS, "outside13", "Plans run on models written from the outside: a thirteenth round",
               "python -m bench outside13", BATCH_NORM, RANDOM, STATEFUL, PER_MICROBATCH)
