"""Plans run on a third round of models written from the outside (2026-12-02), as ``python -m bench outside``
runs its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside3``:

hand-written mixtures of experts (top-2 with dense dispatch and a load-balancing loss; one whose experts
pick their tokens with ``torch.where``: its one line), a DLRM with ``EmbeddingBag`` tables and a word-bag
model with ``Embedding(sparse=True)`` (its one line), SegNet (max-pool indices into ``MaxUnpool2d``), a
spatial transformer (``affine_grid`` / ``grid_sample``), BYOL (an EMA target updated in place in
forward), a spectrally normalised GAN discriminator, a TCN with the old hook-based ``weight_norm``, a
time-first bidirectional GRU tagger, an MLP-mixer under the user's own reentrant checkpoint, a
multi-task CNN returning a dict, HF DeBERTa-v2 with its loss outside the model (``(inputs dict,
labels)`` and ``loss_fn``), Gemma2, Speech2Text, Karpathy's nanoGPT (``(logits, loss)``, tying by
assignment), a detector backbone with frozen batch norm (``train()`` overridden) and forward hooks, a
WGAN critic clipping its weights in forward (and the same through ``.data``: its one line), a tied
autoencoder (the decoder reads the encoder's weights transposed, last first), a CNN full of in-place
ops (the input normalised in place, ``out += identity``, an in-place ReLU through a slice), an
Inception-like CNN with an auxiliary head, a GRU seq2seq with Bahdanau attention and a tied output,
the PyTorch examples' GRU language model (tied), HF's BERT2BERT encoder-decoder, DeepSeek-V3 (latent
attention, routed and shared experts), OLMoE and Marian; and HF models that cannot be captured, for
their one line: NLLB-MoE (experts picking tokens by value), LED (Longformer attention) and ProphetNet.

``python -m bench outside3``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside3").glob("*.py"))
BATCH_NORM = {"segnet", "inception", "inplace_zoo"}  # statistics over each rank's micro-batch
RANDOM: set = set()
STATEFUL = {"byol", "sngan_d"}  # an EMA target / spectral norm's power iteration: once per micro-batch in forward


def main() -> None:
    run_models(MODELS, "outside3", "Plans run on models written from the outside: a third round",
               "python -m bench outside3", BATCH_NORM, RANDOM, STATEFUL)
