"""A model that keeps running statistics of its own in buffers updated in forward (a step counter and an EMA of the input's mean), and an Embedding with max_norm (renormalises its weight in place in forward)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32, max_norm=1.0)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("ema", torch.zeros(32))
        self.mlp = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
        self.out = nn.Linear(32, 50)
    def forward(self, ids, y):
        h = self.emb(ids).mean(1)
        if self.training:
            with torch.no_grad():
                self.steps += 1
                self.ema.mul_(0.9).add_(0.1 * h.mean(0))
        h = self.mlp(h - self.ema) + h
        return F.cross_entropy(self.out(h), y)
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 50, (b, 6), generator=g), "y": torch.randint(0, 50, (b,), generator=g)}
