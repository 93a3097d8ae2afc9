"""An Inception-like CNN: blocks of parallel branches (1x1; 1x1 then 3x3; a max-pool then 1x1)
concatenated, convolutions with BatchNorm and ``F.relu(..., inplace=True)``, a max-pool between blocks
whose output every branch of the next block reads."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 8


class BasicConv2d(nn.Module):
    def __init__(self, i, o, **kw):
        super().__init__()
        self.conv = nn.Conv2d(i, o, bias=False, **kw)
        self.bn = nn.BatchNorm2d(o, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)), inplace=True)


class Inception(nn.Module):
    def __init__(self, i, c1, c3r, c3, pp):
        super().__init__()
        self.b1 = BasicConv2d(i, c1, kernel_size=1)
        self.b2 = nn.Sequential(BasicConv2d(i, c3r, kernel_size=1), BasicConv2d(c3r, c3, kernel_size=3, padding=1))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), BasicConv2d(i, pp, kernel_size=1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b4(x)], 1)


class Net(nn.Module):
    def __init__(self, n=10):
        super().__init__()
        self.stem = BasicConv2d(3, 16, kernel_size=3, padding=1)
        self.i3a = Inception(16, 8, 8, 16, 8)
        self.pool = nn.MaxPool2d(2)
        self.i4a = Inception(32, 16, 8, 16, 8)
        self.fc = nn.Linear(40, n)

    def forward(self, x):
        x = self.i4a(self.pool(self.i3a(self.stem(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_model():
    return Net()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 16, 16, generator=g), torch.randint(0, 10, (b,), generator=g)


def loss_fn(out, y):
    return F.cross_entropy(out, y)
