"""A stacked-GRU language model in plain torch, for the fidelity tests: an embedding, three
single-layer ``nn.GRU(batch_first=True)`` modules in a ``nn.ModuleList``, a linear decoder."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

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
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(0, VOCAB, (batch_size, SEQ + 1), generator=g)
    return stream[:, :-1].contiguous(), stream[:, 1:].contiguous()


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.reshape(-1, VOCAB), target.reshape(-1))
