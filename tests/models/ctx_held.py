"""Blocks whose activation is a custom op whose autograd keeps its mask on ``ctx`` instead of saving it
(as HF's grouped-mm MoE keeps its experts' offsets): no saved-tensor hook sees the mask, so neither a
checkpoint nor a swap's pack hook lets it go; the simulator once had a recomputed block drop it."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn

_spec = importlib.util.spec_from_file_location("memflow_test_lm", Path(__file__).resolve().with_name("_lm.py"))
_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lm)

VOCAB, HIDDEN, SEQ = 64, 32, 32
BATCH_SIZE = 8


@torch.library.custom_op("memflow_test::masked_relu", mutates_args=())
def masked_relu(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x * mask


@masked_relu.register_fake
def _(x, mask):
    return torch.empty_like(x)


def _setup(ctx, inputs, output):
    ctx.mask = inputs[1]  # (not ctx.save_for_backward: no saved-tensor hook sees it)


def _backward(ctx, g):
    return g * ctx.mask, None


masked_relu.register_autograd(_backward, setup_context=_setup)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        return x + self.down(masked_relu(h, (h > 0).to(h.dtype)))


class CtxHeld(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def build_model() -> nn.Module:
    return CtxHeld()


def example_batch(batch_size: int):
    return _lm.token_batch(batch_size, VOCAB, SEQ)


loss_fn = _lm.lm_loss
