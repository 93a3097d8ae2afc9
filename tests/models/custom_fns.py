"""A model's own autograd.Functions whose backward is not autograd's of their forward: a sign with a
straight-through gradient (saves its input), a gradient-reversal layer (returns a view of its input,
keeps a constant on ctx) and a SiLU that saves the sigmoid it made (a tensor of its own)."""
import torch, torch.nn as nn, torch.nn.functional as F

BATCH_SIZE = 8


class SignSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1).to(g.dtype)


class Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.alpha * g, None


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s * (1 + x * (1 - s))


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.a, self.b = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, h):
        return h + self.b(SiLU.apply(self.a(SignSTE.apply(h))))


class Net(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.inp = nn.Linear(16, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(3)])
        self.adv = nn.Linear(d, 2)
        self.out = nn.Linear(d, 4)

    def forward(self, x, y, dom):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return F.cross_entropy(self.out(h), y) + F.cross_entropy(self.adv(Reverse.apply(h, 0.5)), dom)


def build_model():
    torch.manual_seed(0)
    return Net()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 16, generator=g), "y": torch.randint(0, 4, (b,), generator=g),
            "dom": torch.randint(0, 2, (b,), generator=g)}
