"""Plans run on a fourteenth round of models written from the outside, as ``python -m bench outside`` runs
its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside14``:

HF BiT (weight-standardised convs, dynamic "SAME" padding, GroupNorm), HF Cohere (attention and MLP in
parallel off one bias-free LayerNorm, per-head query/key norm, scaled logits, tied head), HF ConvNextV2
(global response norm, drop-path), a deformable-like CNN (a conv predicts per-pixel offsets and a mask,
``F.grid_sample`` resamples, BatchNorm), HF FocalNet (focal modulation, layer-scale), a graph attention
network (per-destination softmax by ``scatter_reduce`` and ``index_add_``, attention dropout), a Gumbel-softmax
VQ-VAE (noise drawn in forward, a straight-through one-hot), a transformer updating fresh tensors in place
(``mul_``, ``add_``, ``+=``, ``sigmoid_``), a Mixture-of-Depths transformer (a router's ``topk`` picks half
the tokens, written back by ``scatter_add`` and ``index_put(accumulate=True)``), HF Persimmon (query/key
LayerNorm, rotary on half of each head), a ResNet with weight standardisation by ``register_parametrization``
and a ``spectral_norm`` linear (its power-iteration buffers updated in every forward), HF Swinv2 (shifted
windows, cosine attention, a position-bias MLP), HF XGLM (sinusoidal positions from the padding mask).

``python -m bench outside14``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside14").glob("*.py"))
BATCH_NORM = {"deform_grid"}
# dropout, drop-path or Gumbel noise drawn in forward
RANDOM = {"convnextv2_cls", "focalnet_cls", "gat_edges", "gumbel_vq", "persimmon_lm", "swinv2_cls",
          "xglm_lm"}
STATEFUL = {"stdconv_param"}  # spectral norm's power iteration updates its buffers in forward
PER_MICROBATCH: set = set()


def main() -> None:
    run_models(MODELS, "outside14", "Plans run on models written from the outside: a fourteenth round",
               "python -m bench outside14", BATCH_NORM, RANDOM, STATEFUL, PER_MICROBATCH)
