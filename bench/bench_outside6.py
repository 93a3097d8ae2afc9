"""Plans run on a sixth round of models written from the outside (2026-12-03), as ``python -m bench outside``
runs its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside6``:

a frozen encoder with trainable adapters, BitFit, uncertainty-weighted multi-task heads in an
``nn.ModuleDict``, a parameter table read at the input and the output and a gate shared by the first and
last of eight blocks, tensor and module backward hooks, a gradient-reversal layer, DINO (an EMA teacher
updated with ``lerp_`` and a centering buffer in forward, two crop sizes), ``nn.Unfold`` / ``F.fold``,
``EmbeddingBag`` with offsets and ``torch.bucketize`` (in-batch negatives), ``cummax`` / ``sort`` set
pooling, a closed-form ridge head (``linalg.qr`` / ``solve``), top-k graph pooling (``gather``), a 3-D
U-Net, rotary embeddings through ``view_as_complex``, 48 thin residual blocks, one wide linear, a module
applied recursively over a tree, an encoder feeding two decoders, per-head projections stacked into
q/k/v; HF T5 (tied embeddings), ALBERT (one layer's weights six times), Mixtral, Swin and Whisper.

``python -m bench outside6``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside6").glob("*.py"))
BATCH_NORM: set = set()
RANDOM: set = set()
STATEFUL = {"dino"}  # its teacher (lerp_) and centre updated in forward: once per micro-batch


def main() -> None:
    run_models(MODELS, "outside6", "Plans run on models written from the outside: a sixth round",
               "python -m bench outside6", BATCH_NORM, RANDOM, STATEFUL)
