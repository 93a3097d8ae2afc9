"""A neural ODE integrated with a fixed-step RK4 solver written in Python: one dynamics module called 4 x 6 times, then a classifier on the final state."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Dyn(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d + 1, 64), nn.Tanh(), nn.Linear(64, d))
    def forward(self, t, h):
        return self.net(torch.cat([h, t.expand(h.shape[0], 1)], 1))
class ODENet(nn.Module):
    def __init__(self, d=16, steps=6):
        super().__init__()
        self.inp, self.f, self.out, self.steps = nn.Linear(10, d), Dyn(d), nn.Linear(d, 3), steps
    def forward(self, x, y):
        h, dt = self.inp(x), 1.0 / self.steps
        for i in range(self.steps):
            t = torch.tensor([[i * dt]])
            k1 = self.f(t, h)
            k2 = self.f(t + dt / 2, h + dt / 2 * k1)
            k3 = self.f(t + dt / 2, h + dt / 2 * k2)
            k4 = self.f(t + dt, h + dt * k3)
            h = h + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return F.cross_entropy(self.out(h), y)
def build_model():
    return ODENet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 10, generator=g), "y": torch.randint(0, 3, (b,), generator=g)}
