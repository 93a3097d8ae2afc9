"""An MLP-residual tower whose forward checkpoints itself with torch.utils.checkpoint.checkpoint_sequential (use_reentrant=False, 3 segments over an nn.Sequential of 6 blocks), then one more block checkpointed with checkpoint(..., use_reentrant=False) called with a keyword argument."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential
BATCH_SIZE = 8
class Res(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    def forward(self, x, scale=1.0):
        return x + scale * self.ff(self.ln(x))
class Tower(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.inp = nn.Linear(32, d)
        self.body = nn.Sequential(*[Res(d) for _ in range(6)])
        self.last = Res(d)
        self.head = nn.Linear(d, 10)
    def forward(self, x, y):
        h = self.inp(x)
        h = checkpoint_sequential(self.body, 3, h, use_reentrant=False)
        h = checkpoint(self.last, h, use_reentrant=False, scale=0.5)
        return F.cross_entropy(self.head(h.mean(1)), y)
def build_model():
    return Tower()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 16, 32, generator=g), "y": torch.randint(0, 10, (b,), generator=g)}
