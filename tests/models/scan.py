"""A selective-scan language model in plain torch (Mamba's sequential path, in small): each layer makes its
decay factors for every step at once (``exp`` saves them whole), then steps through the sequence, each step
multiplying the state by its slice of them (``mul`` saves that slice: a view of the same storage). A GPU
swap of such a layer copies the storage once; it copied each saved slice beside the whole before."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn

_spec = importlib.util.spec_from_file_location("memflow_test_lm", Path(__file__).resolve().with_name("_lm.py"))
_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lm)

VOCAB, HIDDEN, SEQ, LAYERS = 64, 64, 16, 2
BATCH_SIZE = 8


class ScanLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.decay = nn.Linear(HIDDEN, HIDDEN)
        self.inp = nn.Linear(HIDDEN, HIDDEN)
        self.out = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.exp(-torch.nn.functional.softplus(self.decay(x)))  # [B, L, H], saved whole by exp
        u = self.inp(x)
        h = torch.zeros_like(u[:, 0])
        states = []
        for i in range(x.shape[1]):
            h = h * a[:, i] + u[:, i]  # mul saves h and a[:, i], a slice of a's storage
            states.append(h)
        return x + self.out(torch.stack(states, 1))


class ScanLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(ScanLayer() for _ in range(LAYERS))
        self.decoder = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.decoder(x)


def build_model() -> nn.Module:
    return ScanLanguageModel()


def example_batch(batch_size: int):
    return _lm.token_batch(batch_size, VOCAB, SEQ)


loss_fn = _lm.lm_loss
