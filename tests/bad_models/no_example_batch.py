"""Bad: defines build_model but no example_batch."""
from torch import nn


def build_model():
    return nn.Linear(4, 2)
