"""Temporal convolutional network (Bai et al.): dilated causal Conv1d with the old hook-based torch.nn.utils.weight_norm, padding chomped by slicing, residual 1x1 downsample, dropout; sequence classification from the last step."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.nn.utils import weight_norm
BATCH_SIZE = 8
class Block(nn.Module):
    def __init__(self, i, o, d):
        super().__init__()
        self.pad = 2 * d
        self.c1 = weight_norm(nn.Conv1d(i, o, 3, padding=self.pad, dilation=d))
        self.c2 = weight_norm(nn.Conv1d(o, o, 3, padding=self.pad, dilation=d))
        self.down = nn.Conv1d(i, o, 1) if i != o else None
        self.drop = nn.Dropout(0.0)
    def forward(self, x):
        h = self.drop(F.relu(self.c1(x)[:, :, :-self.pad]))
        h = self.drop(F.relu(self.c2(h)[:, :, :-self.pad]))
        return F.relu(h + (x if self.down is None else self.down(x)))
class TCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(*[Block(1 if i == 0 else 24, 24, 2 ** i) for i in range(4)])
        self.fc = nn.Linear(24, 10)
    def forward(self, x):
        return self.fc(self.net(x)[:, :, -1])
def build_model():
    return TCN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 1, 64, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
