"""An LSTM language model in plain torch.

Embedding, a ``nn.ModuleList`` of single-layer ``nn.LSTM`` blocks (separate,
identical modules, so a planner can split between them), a linear decoder.

Scale (``MEMFLOW_EXAMPLE_SCALE``):

* full (default): vocab 10000, hidden 1024, sequence 128, BATCH_SIZE 32.
* tiny: vocab 100, hidden 32, sequence 16, BATCH_SIZE 4.

``MEMFLOW_LSTM_LAYERS`` sets the number of LSTM blocks (default 2), ``MEMFLOW_LSTM_SEQ``
the sequence length.

Batch: ``(tokens, next_tokens)``, both ``(batch, seq)`` int64; ``loss_fn``
is cross entropy over the flattened logits.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

SCALE = os.environ.get("MEMFLOW_EXAMPLE_SCALE", "full").strip().lower() or "full"
if SCALE not in ("full", "tiny"):
    raise ValueError(f"MEMFLOW_EXAMPLE_SCALE={SCALE!r} is not one of full, tiny")

_FULL = dict(vocab=10000, hidden=1024, seq=128, batch=32)
_TINY = dict(vocab=100, hidden=32, seq=16, batch=4)
CONFIG = dict(_FULL if SCALE == "full" else _TINY)

_raw_layers = os.environ.get("MEMFLOW_LSTM_LAYERS", "").strip() or "2"
try:
    CONFIG["layers"] = int(_raw_layers)
except ValueError:
    raise ValueError(f"MEMFLOW_LSTM_LAYERS={_raw_layers!r} is not an integer") from None
if CONFIG["layers"] < 1:
    raise ValueError(f"MEMFLOW_LSTM_LAYERS={CONFIG['layers']} must be >= 1")

_raw_seq = os.environ.get("MEMFLOW_LSTM_SEQ", "").strip()
if _raw_seq:
    try:
        CONFIG["seq"] = int(_raw_seq)
    except ValueError:
        raise ValueError(f"MEMFLOW_LSTM_SEQ={_raw_seq!r} is not an integer") from None
    if CONFIG["seq"] < 1:
        raise ValueError(f"MEMFLOW_LSTM_SEQ={CONFIG['seq']} must be >= 1")

BATCH_SIZE = CONFIG["batch"]
# what `memflow fit --max depth|seq` grows: the number of LSTM blocks, the sequence length
KNOBS = {"depth": "MEMFLOW_LSTM_LAYERS", "seq": "MEMFLOW_LSTM_SEQ"}


class LSTMBlock(nn.Module):
    """One single-layer LSTM (batch first) returning only its output sequence."""

    def __init__(self, hidden: int):
        super().__init__()
        self.lstm = nn.LSTM(hidden, hidden, num_layers=1, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return out


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab: int, hidden: int, layers: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(LSTMBlock(hidden) for _ in range(layers))
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x)
        return self.decoder(x)  # (batch, seq, vocab) logits


def build_model() -> nn.Module:
    return LSTMLanguageModel(CONFIG["vocab"], CONFIG["hidden"], CONFIG["layers"])


def example_batch(batch_size: int):
    """``(tokens, next_tokens)`` from a seeded random token stream."""
    g = torch.Generator(device="cpu").manual_seed(0)
    stream = torch.randint(
        0, CONFIG["vocab"], (batch_size, CONFIG["seq"] + 1), generator=g, device="cpu"
    )
    stream = stream.to(torch.get_default_device())
    return stream[:, :-1].contiguous(), stream[:, 1:].contiguous()


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))
