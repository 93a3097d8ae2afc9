"""Plans run on a ninth round of models written from the outside (2026-12-03), as ``python -m bench outside``
runs its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside9``:

HF SegFormer (semantic segmentation, the logits upsampled inside the loss), BLIP captioning (a causal text
decoder cross-attending to a ViT), SpeechT5 speech-to-text, Wav2Vec2-Conformer CTC, MobileNetV2 (ReLU6,
depthwise convs, TensorFlow padding, an in-place dropout), Hiera (mask units, unrolled tokens), GPT-NeoX
(partial rotary, parallel residual), Pix2Struct (flattened patches with row/column ids), Switch Transformers
(routed top-1 experts), the Time Series Transformer (a mean scaler, lags, a Student-T likelihood), ViLT masked
LM (patches sampled with ``torch.multinomial``), and a hand-written ``Embedding(max_norm=...)`` +
``EmbeddingBag`` + ``BatchNorm1d(momentum=None)`` model.

``python -m bench outside9``.
"""
from __future__ import annotations

from pathlib import Path

import torch

from memflow.executor import plain_losses
from memflow.model_file import load_model_file

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside9").glob("*.py"))
BATCH_NORM = {"mobilenetv2", "segformer"}  # BatchNorm2d in the backbone / the decode head's fuse
RANDOM: set = set()
STATEFUL: set = set()
PER_MICROBATCH: set = set()
NOISY = {"mobilenetv2"}  # batch norm over 4 values per channel where its maps are 1 x 1: rounding amplified


def nudged(path: Path, batch: int = 4, steps: int = 2, scale: float = 1e-7) -> float:
    """How far plain training's losses move when its initial weights are scaled by ``1 + scale``: the
    largest relative difference over ``steps`` steps (plain's own sensitivity to float rounding)."""
    spec = load_model_file(path)
    torch.manual_seed(0)
    model = spec.build()
    model.train()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + scale)
    opt = spec.make_optimizer(model.parameters())
    got = []
    for t in range(steps):
        torch.manual_seed(1000 + t)
        opt.zero_grad(set_to_none=True)
        loss = spec.loss(model, spec.batch(batch))
        loss.backward()
        opt.step()
        got.append(float(loss.detach()))
    return max(abs(a - b) / abs(b) for a, b in zip(got, plain_losses(str(path), batch, steps)))


def main() -> None:
    noisy = {p.stem: f"float rounding amplified: plain's own losses move {nudged(p):.1e} when its initial "
                     "weights are scaled by 1 + 1e-7" for p in MODELS if p.stem in NOISY}
    run_models(MODELS, "outside9", "Plans run on models written from the outside: a ninth round",
               "python -m bench outside9", BATCH_NORM, RANDOM, STATEFUL, PER_MICROBATCH, noisy)
