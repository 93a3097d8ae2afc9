"""A very deep, very thin residual MLP: 48 identical pre-norm blocks (LayerNorm, Linear 32->64, GELU, Linear 64->32) in one nn.ModuleList over a sequence of feature vectors, a regression head; many small blocks of equal cost."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))
class DeepMLP(nn.Module):
    def __init__(self, d_in=12, d=32, depth=48):
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.out = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 1))
    def forward(self, x, y):
        h = self.inp(x)
        for blk in self.blocks:
            h = blk(h)
        return F.mse_loss(self.out(h).squeeze(-1), y)
def build_model():
    return DeepMLP()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 64, 12, generator=g), "y": torch.randn(b, 64, generator=g)}
