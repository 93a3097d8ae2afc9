"""FNet-like: token mixing by a 2-D FFT (complex intermediates), real part kept."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Block(nn.Module):
    def __init__(self, d):
        super().__init__(); self.n1 = nn.LayerNorm(d); self.n2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
    def forward(self, x):
        x = self.n1(x + torch.fft.fft2(x).real)
        return self.n2(x + self.ff(x))
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.emb = nn.Embedding(64, 32); self.blocks = nn.Sequential(*[Block(32) for _ in range(3)]); self.out = nn.Linear(32, 2)
    def forward(self, ids, y):
        return F.cross_entropy(self.out(self.blocks(self.emb(ids)).mean(1)), y)
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 64, (b, 16), generator=g), "y": torch.randint(0, 2, (b,), generator=g)}
