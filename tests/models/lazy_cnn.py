"""A CNN of lazy modules (``nn.LazyConv2d``, ``LazyBatchNorm2d``, ``LazyLinear``): shapes from the first forward."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 8


def build_model():
    return nn.Sequential(nn.LazyConv2d(8, 3, padding=1), nn.LazyBatchNorm2d(), nn.ReLU(), nn.LazyConv2d(8, 3, stride=2),
                         nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 12, 12, generator=g), torch.randint(0, 10, (b,), generator=g)


def loss_fn(out, y):
    return F.cross_entropy(out, y)
