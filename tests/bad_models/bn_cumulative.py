"""BatchNorm with momentum=None (a cumulative average of the batch statistics): torch reads its own step
count, num_batches_tracked, as a Python number every training step."""
import torch
from torch import nn

BATCH_SIZE = 4


def build_model():
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16, momentum=None), nn.ReLU(), nn.Linear(16, 1))


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return ({"input": torch.randn(b, 8, generator=g)}, torch.randn(b, 1, generator=g))


def loss_fn(out, target):
    return nn.functional.mse_loss(out, target)
