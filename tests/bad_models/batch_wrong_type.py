"""Bad: example_batch returns a triple instead of a dict or (inputs, target)."""
import torch
from torch import nn


def build_model():
    return nn.Linear(4, 2)


def example_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randn(batch_size, 2), "extra"


def loss_fn(output, target):
    return nn.functional.mse_loss(output, target)
