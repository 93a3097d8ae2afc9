"""A stacked-LSTM language model for the fidelity tests, in plain torch.

Embedding, four single-layer ``nn.LSTM(batch_first=True)`` modules in a ``nn.ModuleList`` with
dropout between them, a linear decoder over a 5k vocabulary, 64 steps: unlike
``examples/lstm.py`` its logits (batch × 64 × 5000) dominate the step, and dropout masks sit
between the LSTMs. ``MEMFLOW_TEST_DROPOUT`` sets the dropout probability (default 0.1),
``MEMFLOW_TEST_HIDDEN`` the width (default 32).
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch
from torch import nn

_spec = importlib.util.spec_from_file_location("memflow_test_lm", Path(__file__).resolve().with_name("_lm.py"))
_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lm)

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
    return _lm.token_batch(batch_size, VOCAB, SEQ)


loss_fn = _lm.lm_loss
