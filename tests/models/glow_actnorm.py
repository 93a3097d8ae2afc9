"""A Glow-like flow: ActNorm initialised from the first batch (a Python flag), an invertible 1x1 conv (slogdet), affine coupling."""
import math, torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class ActNorm(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(1, c, 1, 1))
        self.logs = nn.Parameter(torch.zeros(1, c, 1, 1))
        self.initialized = False
    def forward(self, x):
        if not self.initialized:
            with torch.no_grad():
                self.loc.copy_(-x.mean((0, 2, 3), keepdim=True))
                self.logs.copy_(-torch.log(x.std((0, 2, 3), keepdim=True) + 1e-6))
            self.initialized = True
        return (x + self.loc) * self.logs.exp(), self.logs.sum() * x.shape[2] * x.shape[3]
class InvConv(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.w = nn.Parameter(torch.linalg.qr(torch.randn(c, c))[0])
    def forward(self, x):
        return F.conv2d(x, self.w.unsqueeze(-1).unsqueeze(-1)), torch.slogdet(self.w)[1] * x.shape[2] * x.shape[3]
class Coupling(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(c // 2, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, c, 3, padding=1))
    def forward(self, x):
        a, b = x.chunk(2, 1)
        s, t = self.net(a).chunk(2, 1)
        s = torch.sigmoid(s + 2)
        return torch.cat([a, (b + t) * s], 1), torch.log(s).flatten(1).sum(1)
class Glow(nn.Module):
    def __init__(self, c=4, k=3):
        super().__init__()
        self.steps = nn.ModuleList(nn.ModuleList([ActNorm(c), InvConv(c), Coupling(c)]) for _ in range(k))
    def forward(self, x):
        logdet = 0
        for step in self.steps:
            for f in step:
                x, ld = f(x)
                logdet = logdet + ld
        logp = -0.5 * (x ** 2 + math.log(2 * math.pi)).flatten(1).sum(1)
        return -(logp + logdet).mean() / x[0].numel()
def build_model():
    return Glow()
def example_batch(b):
    return {"x": torch.randn(b, 4, 8, 8, generator=torch.Generator().manual_seed(0))}
