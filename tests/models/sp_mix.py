"""Sequence parallelism's borders, for the tensor-parallel tests: a decoder whose blocks add a
learned position table (a whole operand that varies along the tokens: split alike) and scale by a
gate (a whole operand broadcast along the tokens: its gradient summed over the group), with a
token-mixing node between the blocks (a running mean over the sequence: it needs its input whole,
so the split tokens are gathered there and split again by the next block)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

_spec = importlib.util.spec_from_file_location("memflow_test_lm", Path(__file__).resolve().with_name("_lm.py"))
_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lm)

VOCAB, HIDDEN, SEQ = 256, 32, 16
BATCH_SIZE = 8


class GatedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.pos = nn.Parameter(torch.randn(SEQ, HIDDEN) * 0.1)
        self.gate = nn.Parameter(torch.ones(HIDDEN))
        self.up = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x) + self.pos
        return x + self.gate * self.down(F.gelu(self.up(h)))


class RunningMean(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        count = torch.arange(1, x.shape[1] + 1, device=x.device, dtype=x.dtype).unsqueeze(-1)
        return x + torch.cumsum(x, 1) / count


class MixDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.block0 = GatedBlock()
        self.mix = RunningMean()
        self.block1 = GatedBlock()
        self.norm = nn.LayerNorm(HIDDEN)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.block1(self.mix(self.block0(self.embed(tokens))))
        return F.linear(self.norm(x), self.embed.weight)


def build_model() -> nn.Module:
    return MixDecoder()


def example_batch(batch_size: int):
    return _lm.token_batch(batch_size, VOCAB, SEQ)


loss_fn = _lm.lm_loss
