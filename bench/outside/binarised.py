"""Binarised MLP with a straight-through estimator (a custom autograd.Function)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Sign(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1).to(g.dtype)
class BinLinear(nn.Linear):
    def forward(self, x):
        return F.linear(Sign.apply(x), Sign.apply(self.weight), self.bias)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(64, 128)
        self.blocks = nn.ModuleList([nn.Sequential(BinLinear(128, 128), nn.BatchNorm1d(128)) for _ in range(4)])
        self.out = nn.Linear(128, 10)
    def forward(self, x, y):
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(h)
        return F.cross_entropy(self.out(h), y)
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 64, generator=g), "y": torch.randint(0, 10, (b,), generator=g)}
