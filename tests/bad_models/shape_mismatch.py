"""Bad: the batch has 5 features, the model expects 4."""
import torch
from torch import nn


def build_model():
    return nn.Linear(4, 2)


def example_batch(batch_size):
    return torch.randn(batch_size, 5), torch.randn(batch_size, 2)


def loss_fn(output, target):
    return nn.functional.mse_loss(output, target)
