"""Plans run on a fifth round of models written from the outside (2026-12-03), as ``python -m bench outside``
runs its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside5``:

a decoder LM with ALiBi and a causal float mask into ``F.scaled_dot_product_attention``, a BiLSTM-CRF (the
forward algorithm stepped in a Python loop), a model that checkpoints itself (``checkpoint_sequential`` and
``checkpoint``), forward hooks storing a frozen encoder's activations on the module (a feature-matching
loss), a mixture density network (``torch.distributions``), ``nn.MultiheadAttention`` with a
``key_padding_mask`` and a [CLS] token concatenated in front, a Performer (random features, ``einsum``,
``cumsum``), a prototypical network (``cdist`` to class means), a RealNVP flow (``torch.flip``), a
Siamese encoder called three times (triplet loss), a spectrogram computed in forward (``torch.stft``), a
U-Net with ``LeakyReLU(inplace=True)`` and ``GroupNorm``, a ``torch.vmap`` ensemble (``functional_call``);
an LSTM with ``AdaptiveLogSoftmaxWithLoss``, a loss on ``hidden[mask]`` and a WGAN-GP critic
(``torch.autograd.grad`` in forward), which cannot be captured (their one line each); HF BigBird,
CANINE, ConvNeXt, LeViT, Mamba-2, Phi, RecurrentGemma, SqueezeBERT, Autoformer and Nystromformer.

``python -m bench outside5``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside5").glob("*.py"))
BATCH_NORM = {"levit", "protonet"}  # statistics over each rank's micro-batch
RANDOM = {"bigbird"}  # its random key blocks are drawn in forward, once per micro-batch
STATEFUL: set = set()


def main() -> None:
    run_models(MODELS, "outside5", "Plans run on models written from the outside: a fifth round",
               "python -m bench outside5", BATCH_NORM, RANDOM, STATEFUL)
