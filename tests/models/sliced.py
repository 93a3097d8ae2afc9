"""A pipeline cut after a node that returns a slice of what it made (half of a tanh's output, which tanh
saves): the executor sends a view of part of a storage as a contiguous copy, held until the micro-batch's
backward starts, and the slice alone does not hold the storage. Before the plan counted the copy, a stage
with two micro-batches in flight was 65,536 bytes (7.8%) above its plan; with the node recomputed (its
checkpoint drops the storage, and the copy, not the storage, is held for the send) the plan was 65,536
bytes (9.2%) above the run."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, HIDDEN, SEQ, CLASSES = 64, 64, 64, 4
BATCH_SIZE = 8


class Split(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(HIDDEN, 2 * HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.lin(x))  # tanh saves h, all of its storage
        return h[..., :HIDDEN]  # a view of half of it: sent on as a copy


class Sliced(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.split = Split()
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(), nn.Linear(4 * HIDDEN, HIDDEN))
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.mlp(self.split(self.embed(tokens))).mean(1))


def build_model() -> nn.Module:
    return Sliced()


def example_batch(batch_size: int):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, VOCAB, (batch_size, SEQ), generator=g), torch.randint(0, CLASSES, (batch_size,), generator=g)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)
