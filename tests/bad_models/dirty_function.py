"""Bad for the capture: a model's own autograd.Function that changes its input in place (ctx.mark_dirty)."""
import torch
from torch import nn


class InplaceRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.clamp_(min=0)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (y > 0).to(g.dtype)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        return self.b(InplaceRelu.apply(self.a(x)))


def build_model():
    return Net()


def example_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randint(0, 2, (batch_size,))


def loss_fn(output, target):
    return nn.functional.cross_entropy(output, target)
