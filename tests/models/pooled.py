"""A sequence classifier whose head pools the hidden states transposed (as Swin's pooler): a pipeline cut
before the pooling sends back a gradient laid out transposed. The executor once sent it as a contiguous
copy beside it, above the plan (on Swin's small last stage 5,816 bytes, 35%)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

_spec = importlib.util.spec_from_file_location("memflow_test_lm", Path(__file__).resolve().with_name("_lm.py"))
_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lm)

VOCAB, HIDDEN, SEQ, CLASSES = 64, 32, 64, 4
BATCH_SIZE = 8


class Pooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.block = _lm.Block(HIDDEN)
        self.pool = nn.AdaptiveAvgPool1d(1)  # over the sequence: reads the hidden states transposed
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.block(self.embed(tokens))
        return self.head(self.pool(x.transpose(1, 2)).flatten(1))


def build_model() -> nn.Module:
    return Pooled()


def example_batch(batch_size: int):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, VOCAB, (batch_size, SEQ), generator=g), torch.randint(0, CLASSES, (batch_size,), generator=g)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)
