"""Bad for capture: a block branches on a tensor's value (runs eagerly; torch.export cannot capture it)."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            return torch.relu(y)
        return y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build_model():
    return Net()


def example_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 2, (batch_size,))


def loss_fn(output, target):
    return nn.functional.cross_entropy(output, target)
