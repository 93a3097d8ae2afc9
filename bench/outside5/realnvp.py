"""A RealNVP normalizing flow on 2-D-ish vectors: affine coupling layers with checkerboard halves, the scale's tanh-bounded log added as the log-determinant, torch.flip between couplings, an exact negative log-likelihood under a standard normal prior."""
import math, torch, torch.nn as nn
BATCH_SIZE = 8
D = 16
class Coupling(nn.Module):
    def __init__(self, d, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d // 2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, d))
        self.scale = nn.Parameter(torch.ones(d // 2))
    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        s, t = self.net(a).chunk(2, dim=1)
        s = self.scale * torch.tanh(s)
        b = b * torch.exp(s) + t
        return torch.cat([a, b], 1), s.sum(1)
class RealNVP(nn.Module):
    def __init__(self, layers=6):
        super().__init__()
        self.layers = nn.ModuleList(Coupling(D) for _ in range(layers))
    def forward(self, x):
        logdet = torch.zeros(x.shape[0])
        for layer in self.layers:
            x, ld = layer(x)
            logdet = logdet + ld
            x = torch.flip(x, dims=[1])
        log_prior = -0.5 * (x ** 2).sum(1) - 0.5 * D * math.log(2 * math.pi)
        return -(log_prior + logdet).mean()
def build_model():
    return RealNVP()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, D, generator=g) * torch.linspace(0.5, 2.0, D)}
