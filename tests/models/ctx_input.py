"""A batch input held by a custom op's autograd on ``ctx`` (not saved through ``save_for_backward``):
a per-sample feature mask the model multiplies its hidden features by. No saved-tensor hook sees it,
so only when the executor's copy of the input is actually let go tells how long it lives: to the
backward of the node that applied it."""
from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

BATCH_SIZE = 256


@torch.library.custom_op("memflow_test::feature_mask", mutates_args=())
def feature_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x * mask


@feature_mask.register_fake
def _(x, mask):
    return torch.empty_like(x)


def _setup(ctx, inputs, output):
    ctx.mask = inputs[1]  # (not ctx.save_for_backward: no saved-tensor hook sees it)


def _backward(ctx, g):
    return g * ctx.mask, None


feature_mask.register_autograd(_backward, setup_context=_setup)


class Masked(nn.Module):
    def __init__(self, d=1024):
        super().__init__()
        self.inp = nn.Linear(16, d)
        self.mid = nn.Sequential(nn.Tanh(), nn.Linear(d, 16))
        self.out = nn.Linear(16, 10)

    def forward(self, x, mask, y):
        h = torch.tanh(self.inp(x))
        h = feature_mask(h, mask)
        h = self.mid(h)
        return F.cross_entropy(self.out(h), y)


def build_model():
    torch.manual_seed(0)
    return Masked()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 16, generator=g), "mask": (torch.rand(b, 1024, generator=g) > 0.5).float(),
            "y": torch.randint(0, 10, (b,), generator=g)}
