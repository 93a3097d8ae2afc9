"""Plans run on an eleventh round of models written from the outside, as ``python -m bench outside``
runs its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside11``:

an AWD-LSTM language model (embedding dropout, locked dropout, DropConnect on the hidden-to-hidden weight
swapped in with ``torch.func.functional_call``, a tied decoder, the segment's initial states as inputs), HF
DeiT with its distillation token and a hard-label distillation ``loss_fn``, a depthwise-separable CNN in
channels_last with squeeze-excitation applied in place (``x.mul_(gate)``) and in-place residual adds, a Set
Transformer (ISAB blocks with learned inducing points and a PMA pool, expanded over the batch, under a
padding mask), HF StableLM (partial rotary, per-head q/k layer norms, parallel residual, grouped-query
attention), HF UMT5 (a relative-position bias in every attention layer), a 1-D Wave-U-Net (strided and
transposed convs, skip concatenations, GroupNorm, an L1 loss on a target waveform), and a hand-written ViT
with a class token and per-sample stochastic depth drawn with ``torch.rand`` in forward.

``python -m bench outside11``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside11").glob("*.py"))
BATCH_NORM = {"dwsep_se_chlast"}
RANDOM = {"awd_lstm", "vit_droppath"}  # dropout masks (embedding, locked, weight) / drop-path masks drawn in forward
STATEFUL: set = set()
PER_MICROBATCH: set = set()


def main() -> None:
    run_models(MODELS, "outside11", "Plans run on models written from the outside: an eleventh round",
               "python -m bench outside11", BATCH_NORM, RANDOM, STATEFUL, PER_MICROBATCH)
