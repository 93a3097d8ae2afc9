"""Plans run on a tenth round of models written from the outside (2026-12-04), as ``python -m bench outside``
runs its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside10``:

a DeepLabV3-style segmentation net (atrous convs, an ASPP head with a pooled branch, in-place ReLUs, per-pixel
labels with an ignore index), SqueezeNet fire modules, HF RoFormer MLM, a DETR-like detector (torch's
transformer encoder and decoder over a learned query set, a fixed assignment loss), HF BlenderbotSmall, a GRU
encoder-decoder with attention and a tied embedding (Meng et al.'s NMT style), a fixed-shape top-2 MoE with
a load-balancing loss, a WideResNet with a block applied twice, HF LayoutLM token classification, and HF
Data2VecAudio CTC with its own loss and with ``loss_fn``.

``python -m bench outside10``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside10").glob("*.py"))
BATCH_NORM = {"deeplabv3", "wide_resnet_dropout", "squeezenet_fire", "detr_like"}
RANDOM: set = set()
STATEFUL: set = set()
PER_MICROBATCH = {"moe_topk_dense"}  # the router's load-balancing loss over each micro-batch's routing


def main() -> None:
    run_models(MODELS, "outside10", "Plans run on models written from the outside: a tenth round",
               "python -m bench outside10", BATCH_NORM, RANDOM, STATEFUL, PER_MICROBATCH)
