"""Lazy modules whose shaping forward fails on the example batch (a reshape that assumes batch 8)."""
import torch
from torch import nn

BATCH_SIZE = 8


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.LazyLinear(4)

    def forward(self, x):
        return self.head(x.reshape(8, -1)).pow(2).mean()


def build_model():
    return Net()


def example_batch(b):
    return {"x": torch.randn(b, 6)}
