"""An MLP-mixer-like model whose own forward uses torch.utils.checkpoint with use_reentrant=True (the old default) on every block."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
BATCH_SIZE = 4
class Mix(nn.Module):
    def __init__(self, t, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok = nn.Sequential(nn.Linear(t, 2 * t), nn.GELU(), nn.Linear(2 * t, t))
        self.ch = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
    def forward(self, x):
        x = x + self.tok(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.ln2(x))
class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 32, 4, 4)
        self.blocks = nn.ModuleList(Mix(64, 32) for _ in range(4))
        self.head = nn.Linear(32, 10)
    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=True)
        return self.head(x.mean(1))
def build_model():
    return Mixer()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
