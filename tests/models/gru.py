"""A stacked-GRU language model in plain torch, for the fidelity tests: an embedding, three
single-layer ``nn.GRU(batch_first=True)`` modules in a ``nn.ModuleList``, a linear decoder."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn

_spec = importlib.util.spec_from_file_location("memflow_test_lm", Path(__file__).resolve().with_name("_lm.py"))
_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lm)

VOCAB, HIDDEN, SEQ, LAYERS = 64, 64, 32, 3
BATCH_SIZE = 8


class GRULanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.grus = nn.ModuleList(nn.GRU(HIDDEN, HIDDEN, batch_first=True) for _ in range(LAYERS))
        self.decoder = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        for gru in self.grus:
            x, _ = gru(x)
        return self.decoder(x)


def build_model() -> nn.Module:
    return GRULanguageModel()


def example_batch(batch_size: int):
    return _lm.token_batch(batch_size, VOCAB, SEQ)


loss_fn = _lm.lm_loss
