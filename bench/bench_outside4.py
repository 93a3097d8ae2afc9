"""Plans run on a fourth round of models written from the outside (2026-12-02), as ``python -m bench outside``
runs its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside4``:

a hypernetwork (weights generated as activations, used through ``F.linear``), a VQ-VAE (nearest code by
``argmin``, the straight-through estimator, an EMA codebook updated in place in forward), quantisation-aware
training (torch.ao's ``prepare_qat``: observers update their buffers in forward), a message-passing GNN
(``index_add_`` / ``scatter_add_``), a conv + LSTM recogniser trained with ``F.ctc_loss``, a Fourier neural
operator (complex-valued parameters, ``rfft`` / ``irfft``), a float64 MLP (``.double()`` in ``build_model``),
PointNet (T-Nets applied with ``bmm``), a ConvLSTM stepped over frames, a capsule network (dynamic routing),
a Transformer-XL-like memory kept on the module, PixelCNN twice (its mask applied through ``.data`` in
forward, as tutorials write it: its one line; and functionally, with gated layers), a DCGAN generator +
discriminator, ESPCN (``PixelShuffle``), a neural ODE (one module called 24 times by an RK4 loop), an RNN with
an orthogonal parametrization and a spectrally normalised head; HF XLNet, Funnel, GPTBigCode (multi-query),
HuBERT fine-tuned with CTC (its loss in ``loss_fn``), BEiT, Perceiver, ELECTRA, MobileBERT, FSMT, Qwen3-MoE,
Jamba (Mamba + attention + experts), ModernBERT, RWKV, PatchTST, Decision Transformer, LongT5, MobileViT and
ESM.

``python -m bench outside4``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside4").glob("*.py"))
BATCH_NORM = {"pointnet", "dcgan"}  # statistics over each rank's micro-batch
RANDOM: set = set()
STATEFUL = {"vqvae", "qat", "ortho_rnn"}  # EMA codebook / observers / spectral norm's power iteration: once per micro-batch


def main() -> None:
    run_models(MODELS, "outside4", "Plans run on models written from the outside: a fourth round",
               "python -m bench outside4", BATCH_NORM, RANDOM, STATEFUL)
