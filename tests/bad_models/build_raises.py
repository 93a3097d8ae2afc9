"""Bad: build_model raises."""
import torch
from torch import nn


def build_model():
    return nn.Linear(4, -2)


def example_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randn(batch_size, 2)
