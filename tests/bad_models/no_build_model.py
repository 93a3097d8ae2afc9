"""Bad: defines example_batch but no build_model."""
import torch


def example_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randn(batch_size, 2)
