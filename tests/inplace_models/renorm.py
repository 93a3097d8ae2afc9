"""A parameter changed in place in the forward: an Embedding with max_norm (the rows it reads renormalised in
place), dropout after it, a bidirectional GRU. (Spectral norm's power iteration, which updates its vectors in
every forward, a replay included, as BatchNorm's running statistics, plans and runs too, to a loss a few
parts in a million from plain training's after the first step: not this file's exact-loss check.)"""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 24, max_norm=1.0)
        self.drop = nn.Dropout(0.1)
        self.gru = nn.GRU(24, 32, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(64, 64)
        self.head = nn.Linear(64, 50)

    def forward(self, x):
        h, _ = self.gru(self.drop(self.emb(x)))
        return self.head(torch.tanh(self.proj(h)))


def build_model():
    return Net()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 50, (b, 16), generator=g)
    return x, x


def loss_fn(out, y):
    return F.cross_entropy(out.flatten(0, 1), y.flatten())
