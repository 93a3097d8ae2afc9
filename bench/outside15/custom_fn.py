"""A hand-written small CNN classifier on 3x16x16 images built around two torch.autograd.Function subclasses with hand-written backward passes and a straight-through estimator: SoftplusFn (softplus forward, saving its input with ctx.save_for_backward and returning grad * sigmoid(x) in backward) after each of two 3x3 convolutions (3 -> 16 channels, then 16 -> 24 with stride 2); ChannelRMSNormFn (an RMS norm over the channel dimension that computes the inverse RMS inside forward, saves the normalised output and that intermediate with save_for_backward and keeps the non-tensor dim and eps as plain attributes on ctx, its backward inv * (g - y * mean(g * y))) followed by a learned per-channel scale; activations then quantised to 4 levels in [0, 1] by a straight-through estimator written with detach (x + (round(3 * clamp(x, 0, 1)) / 3 - x).detach(), so the gradient passes as if identity), average pooling to 4x4, a 384 -> 64 -> 10 MLP with ReLU; cross-entropy in loss_fn. No dropout, no batch norm, no buffers."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class SoftplusFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return F.softplus(x)
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x)
class ChannelRMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, eps):
        inv = torch.rsqrt(x.pow(2).mean(dim, keepdim=True) + eps)
        y = x * inv
        ctx.save_for_backward(y, inv)
        ctx.dim, ctx.eps = dim, eps
        return y
    @staticmethod
    def backward(ctx, g):
        y, inv = ctx.saved_tensors
        return inv * (g - y * (g * y).mean(ctx.dim, keepdim=True)), None, None
class CustomNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 24, 3, stride=2, padding=1)
        self.scale = nn.Parameter(torch.ones(1, 24, 1, 1))
        self.fc1 = nn.Linear(24 * 16, 64)
        self.fc2 = nn.Linear(64, 10)
    def forward(self, x):
        h = SoftplusFn.apply(self.c1(x))
        h = SoftplusFn.apply(self.c2(h))
        h = ChannelRMSNormFn.apply(h, 1, 1e-5) * self.scale
        q = torch.round(3 * h.clamp(0, 1)) / 3
        h = h + (q - h).detach()
        h = F.adaptive_avg_pool2d(h, 4).flatten(1)
        return self.fc2(F.relu(self.fc1(h)))
def build_model():
    return CustomNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 16, 16, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
