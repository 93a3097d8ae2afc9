"""Plans run on a fifteenth round of models written from the outside, as ``python -m bench outside`` runs
its own (:func:`bench.bench_outside.run_models`), each file in ``bench/outside15``:

an ``EmbeddingBag`` with per-sample weights beside a padded ``Embedding`` (offsets per sample, made global in
forward), a three-layer bidirectional LSTM with dropout and attention pooling, a CNN of two hand-written
``autograd.Function``s (one saving its input, one its output and plain attributes on ``ctx``) and a
straight-through quantiser, HF EnCodec's encoder, residual quantiser and decoder with a straight-through
estimator (not captured: its padding amounts are tensors whose maximum is read in Python), HF GPT-J (parallel
attention and MLP, rotary on part of each head), causal linear attention by ``cumsum`` of key-value outer
products with a hand-written RMSNorm, HF Mistral with a sliding window shorter than the sequence, HF MPNet for
masked LM (relative position buckets, a tied head), HF MPT (ALiBi, fused Wqkv), HF OLMo-2 (norms on the whole
q and k projections and on each sublayer's output), HF Phi-3 (fused qkv and gate-up projections), HF RemBERT
(narrow input embeddings projected up) and HF WavLM for CTC (gated relative position bias; its loss in
``loss_fn``, as the library's reads the labels' maximum in Python).

``python -m bench outside15``.
"""
from __future__ import annotations

from pathlib import Path

from .bench_outside import run_models

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside15").glob("*.py"))
BATCH_NORM: set = set()
RANDOM = {"wavlm_ctc", "mpnet_mlm", "rembert_cls", "phi3_lm", "gptj_lm", "mpt_lm", "bag_sparse", "bilstm_deep"}  # dropout
STATEFUL: set = set()
PER_MICROBATCH: set = set()


def main() -> None:
    run_models(MODELS, "outside15", "Plans run on models written from the outside: a fifteenth round",
               "python -m bench outside15", BATCH_NORM, RANDOM, STATEFUL, PER_MICROBATCH)
