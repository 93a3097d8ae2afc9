"""Bad: build_model is not a function."""
import torch

build_model = 42


def example_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randn(batch_size, 2)
