"""A stacked-LSTM language model for the fidelity tests, in plain torch.

Embedding, four single-layer ``nn.LSTM(batch_first=True)`` modules in a ``nn.ModuleList`` with
dropout between them, a linear decoder over a 5k vocabulary, 64 steps: unlike
``examples/lstm.py`` its logits (batch × 64 × 5000) dominate the step, and dropout masks sit
between the LSTMs. ``MEMFLOW_TEST_DROPOUT`` sets the dropout probability (default 0.1).
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, SEQ, LAYERS = 5000, 64, 4
HIDDEN = int(os.environ.get("MEMFLOW_TEST_HIDDEN", "32"))
DROPOUT = float(os.environ.get("MEMFLOW_TEST_DROPOUT", "0.1"))
BATCH_SIZE = 4


class StackedLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.drop = nn.Dropout(DROPOUT)
        self.lstms = nn.ModuleList(nn.LSTM(HIDDEN, HIDDEN, batch_first=True) for _ in range(LAYERS))
        self.decoder = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.embedding(tokens))
        for lstm in self.lstms:
            x, _ = lstm(x)
            x = self.drop(x)
        return self.decoder(x)


def build_model() -> nn.Module:
    return StackedLSTM()


def example_batch(batch_size: int):
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(0, VOCAB, (batch_size, SEQ + 1), generator=g)
    return stream[:, :-1].contiguous(), stream[:, 1:].contiguous()


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.reshape(-1, VOCAB), target.reshape(-1))
