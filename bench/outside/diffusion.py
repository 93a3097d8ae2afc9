"""A small diffusion U-Net: GroupNorm + SiLU residual blocks, sinusoidal timestep embedding added per block, skip concatenations; noise drawn in forward."""
import math, torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
def temb(t, d):
    f = torch.exp(-math.log(10000) * torch.arange(d // 2, dtype=torch.float32) / (d // 2))
    a = t.float()[:, None] * f[None]
    return torch.cat([a.sin(), a.cos()], 1)
class Res(nn.Module):
    def __init__(self, cin, cout, td=32):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(4, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(td, cout)
        self.n2, self.c2 = nn.GroupNorm(4, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()
    def forward(self, x, te):
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.t(te)[:, :, None, None]
        h = self.c2(F.silu(self.n2(h)))
        return h + self.skip(x)
class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.tmlp = nn.Sequential(nn.Linear(32, 32), nn.SiLU(), nn.Linear(32, 32))
        self.inc = nn.Conv2d(3, 16, 3, padding=1)
        self.d1, self.d2 = Res(16, 16), Res(16, 32)
        self.mid = Res(32, 32)
        self.u2, self.u1 = Res(64, 16), Res(32, 16)
        self.out = nn.Conv2d(16, 3, 3, padding=1)
    def forward(self, x0, t):
        noise = torch.randn_like(x0)
        a = torch.cos(t.float() / 1000 * math.pi / 2)[:, None, None, None]
        x = a * x0 + (1 - a * a).sqrt() * noise
        te = self.tmlp(temb(t, 32))
        h1 = self.d1(self.inc(x), te)
        h2 = self.d2(F.avg_pool2d(h1, 2), te)
        m = self.mid(F.avg_pool2d(h2, 2), te)
        u = self.u2(torch.cat([F.interpolate(m, scale_factor=2.0), h2], 1), te)
        u = self.u1(torch.cat([F.interpolate(u, scale_factor=2.0), h1], 1), te)
        return F.mse_loss(self.out(u), noise)
def build_model():
    return UNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x0": torch.randn(b, 3, 32, 32, generator=g), "t": torch.randint(0, 1000, (b,), generator=g)}
