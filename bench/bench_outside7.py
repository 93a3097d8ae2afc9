"""Plans run on a seventh round of models written from the outside (2026-12-03), as ``python -m bench outside``
runs its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside7``:

a Conformer encoder (macaron feed-forwards, ``nn.MultiheadAttention``, a GLU / depthwise-conv module with
``BatchNorm1d`` and ``SiLU(inplace=True)``), a layer-normalised GRU cell unrolled over 24 steps with a tied
output (``F.linear`` on the embedding's weight), a Res2Net CNN with CBAM attention (in-place ReLUs and
``out += identity``), ShuffleNetV2 units (``chunk``, ``cat``, channel shuffle by view / transpose), one
CNN encoder shared across three resolutions (``F.interpolate``, bilinear), a Universal Transformer (one
block applied six times, ``F.scaled_dot_product_attention``), a FiLM-conditioned CNN (one conditioning
tensor read by every block), a dense switch MoE (batched experts through ``einsum``, a load-balancing
loss), an ``nn.LSTM`` with ``proj_size`` (bidirectional, two layers) and a ``loss_fn``; HF Reformer
(reversible layers in a custom autograd Function, LSH attention), JetMoE and mBART.

``python -m bench outside7``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside7").glob("*.py"))
BATCH_NORM = {"conformer", "res2net_cbam", "shufflenet"}  # statistics over each rank's micro-batch
RANDOM: set = set()
STATEFUL: set = set()
PER_MICROBATCH = {"jetmoe", "moe_aux"}  # load-balancing losses over each micro-batch's routing


def main() -> None:
    run_models(MODELS, "outside7", "Plans run on models written from the outside: a seventh round",
               "python -m bench outside7", BATCH_NORM, RANDOM, STATEFUL, PER_MICROBATCH)
