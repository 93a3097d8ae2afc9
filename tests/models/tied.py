"""Tied weights across pipeline stages (an OPT-like decoder in plain torch), for the fidelity tests.

The token embedding's weight is also the output head's, so a pipeline cut between them puts a
replica on both stages; a 4k vocabulary makes that weight most of the model, so the gradient
sync, not the activations, sets the peak at small batches.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

_spec = importlib.util.spec_from_file_location("memflow_test_lm", Path(__file__).resolve().with_name("_lm.py"))
_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lm)

VOCAB, HIDDEN, SEQ, LAYERS = 4096, 32, 16, 3
BATCH_SIZE = 8


class TiedDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(_lm.Block(HIDDEN) for _ in range(LAYERS))
        self.norm = nn.LayerNorm(HIDDEN)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.norm(x), self.embed.weight)


def build_model() -> nn.Module:
    return TiedDecoder()


def example_batch(batch_size: int):
    return _lm.token_batch(batch_size, VOCAB, SEQ)


loss_fn = _lm.lm_loss
