"""Plans run on an eighth round of models written from the outside (2026-12-03), as ``python -m bench outside``
runs its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside8``:

HF DINOv2 (LayerScale, stochastic depth drawing per-sample masks), GraniteMoE (ScatterMoE experts split by
counts read with ``.tolist()``), VideoMAE (a tubelet ``Conv3d``), TimeSformer (divided space-time attention),
DPT (four encoder layers' tokens reassembled into a feature pyramid, an L1 ``loss_fn`` on the depth),
PVTv2 (spatial-reduction attention, depthwise convs in the MLPs), GIT (image tokens prepended to a
causal text decoder), DAC (Snake activations, a residual vector quantizer with a straight-through
estimator, its losses and an L1 reconstruction), SEW-D (a squeezed DeBERTa encoder over speech frames,
CTC in ``loss_fn``), Informer (ProbSparse attention, distilling layers), and a hand-written encoder in an
older style (scores masked in place, a gate written into slices of a fresh buffer, ``x += pos``, label
smoothing with ``ignore_index``).

``python -m bench outside8``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside8").glob("*.py"))
BATCH_NORM: set = set()
RANDOM = {"dinov2"}  # stochastic depth: a per-sample mask drawn in every block
STATEFUL: set = set()
PER_MICROBATCH = {"granitemoe"}  # the router's load-balancing loss over each micro-batch's routing


def main() -> None:
    run_models(MODELS, "outside8", "Plans run on models written from the outside: an eighth round",
               "python -m bench outside8", BATCH_NORM, RANDOM, STATEFUL, PER_MICROBATCH)
