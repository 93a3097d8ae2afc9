"""A CNN with odd but common pieces: in-place residual adds, relu_, a custom autograd Function,
weight-normalised convs (parametrizations), a buffer counted up in forward."""
import torch
from torch import nn
import torch.nn.functional as F
from torch.nn.utils import parametrizations

BATCH_SIZE = 8


class ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.s = s
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * ctx.s, None


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = parametrizations.weight_norm(nn.Conv2d(c, c, 3, padding=1))
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.calls += 1
        out = F.relu_(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return ScaleGrad.apply(F.relu(out, inplace=True), 0.5)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(*[Block(16) for _ in range(4)])
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_model():
    return Net()


def example_batch(batch_size):
    g = torch.Generator().manual_seed(0)
    return torch.randn(batch_size, 3, 16, 16, generator=g), torch.randint(0, 10, (batch_size,), generator=g)


def loss_fn(out, y):
    return F.cross_entropy(out, y)
