"""Bad: the batch has 5 features; the model's first layer, `embed`, takes 4."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.blocks = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)))


def build_model():
    return Net()


def example_batch(batch_size):
    return torch.randn(batch_size, 5), torch.randint(0, 2, (batch_size,))


def loss_fn(output, target):
    return nn.functional.cross_entropy(output, target)
