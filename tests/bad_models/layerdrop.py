"""An MLP stack with LayerDrop: in training, each layer is skipped when a random draw says so
(``if torch.rand([]) < p``): what runs depends on a value."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 8


class Net(nn.Module):
    def __init__(self, p=0.2):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(4))
        self.head = nn.Linear(16, 3)
        self.p = p

    def forward(self, x):
        for layer in self.layers:
            if self.training and torch.rand([]) < self.p:
                continue
            x = x + torch.relu(layer(x))
        return self.head(x)


def build_model():
    return Net()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 16, generator=g), torch.randint(0, 3, (b,), generator=g)


def loss_fn(out, y):
    return F.cross_entropy(out, y)
