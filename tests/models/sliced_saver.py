"""sliced.py's shape with a stage-ending node that saves much and whose backward makes little: a chain of
element-wise ops (each saving its input) ending in a slice sent on as a contiguous copy. Kept, what it saved is
on the device at the send, beside the copy; swapped, it went to the host in the forward, before the send, and
the moment of the send is no peak (the plan once counted it there all the same: 73% over)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, HIDDEN, SEQ, CLASSES = 64, 64, 64, 4
BATCH_SIZE = 8


class Chain(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.cat([x, x.flip(-1)], -1)
        for _ in range(4):
            h = torch.tanh(h) * torch.sigmoid(h)  # (tanh and sigmoid save their outputs, mul its inputs)
        return h[..., :HIDDEN]  # a view of half of it: sent on as a copy


class SlicedSaver(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.chain = Chain()
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(), nn.Linear(4 * HIDDEN, HIDDEN))
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.mlp(self.chain(self.embed(tokens))).mean(1))


def build_model() -> nn.Module:
    return SlicedSaver()


def example_batch(batch_size: int):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, VOCAB, (batch_size, SEQ), generator=g), torch.randint(0, CLASSES, (batch_size,), generator=g)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)
