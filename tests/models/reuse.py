"""Blocks applied several times (weights reused across depth, ALBERT-like), for the fidelity tests.

Two blocks applied in turn, three times each: a block's parameters are read by every node that
applies it, so their gradient is final only after the backward of its first application, and a
pipeline cut between applications puts a replica on each stage.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn

_spec = importlib.util.spec_from_file_location("memflow_test_lm", Path(__file__).resolve().with_name("_lm.py"))
_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lm)

VOCAB, HIDDEN, SEQ, REPEATS = 1024, 64, 16, 3
BATCH_SIZE = 8


class ReusedStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(_lm.Block(HIDDEN) for _ in range(2))
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for _ in range(REPEATS):
            for block in self.blocks:
                x = block(x)
        return self.head(x)


def build_model() -> nn.Module:
    return ReusedStack()


def example_batch(batch_size: int):
    return _lm.token_batch(batch_size, VOCAB, SEQ)


loss_fn = _lm.lm_loss
