"""Blocks applied several times (weights reused across depth, ALBERT-like), for the fidelity tests.

Two blocks applied in turn, three times each: a block's parameters are read by every node that
applies it, so their gradient is final only after the backward of its first application, and a
pipeline cut between applications puts a replica on each stage.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, HIDDEN, SEQ, REPEATS = 1024, 64, 16, 3
BATCH_SIZE = 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.up = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class ReusedStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(2))
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
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(0, VOCAB, (batch_size, SEQ + 1), generator=g)
    return stream[:, :-1].contiguous(), stream[:, 1:].contiguous()


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.reshape(-1, VOCAB), target.reshape(-1))
