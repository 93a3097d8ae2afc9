"""Bad: build_model returns a dict, not an nn.Module."""
import torch


def build_model():
    return {"weight": torch.randn(2, 4)}


def example_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randn(batch_size, 2)
