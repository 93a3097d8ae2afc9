"""A causal Performer-like LM: FAVOR+ positive random features (a fixed Gaussian projection kept as a buffer, exp of projected q/k) and linear attention written with torch.einsum, causality by torch.cumsum over the key-value outer products."""
import math, torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, T = 128, 32
class FavorAttention(nn.Module):
    def __init__(self, d, h, m=32):
        super().__init__()
        self.h, self.dh = h, d // h
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.register_buffer("proj", torch.randn(m, self.dh))
    def features(self, x):
        x = x * self.dh ** -0.25
        wx = torch.einsum("bhtd,md->bhtm", x, self.proj)
        return torch.exp(wx - (x ** 2).sum(-1, keepdim=True) / 2) / math.sqrt(self.proj.shape[0])
    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        qf, kf = self.features(q), self.features(k)
        kv = torch.cumsum(torch.einsum("bhtm,bhtd->bhtmd", kf, v), dim=2)
        num = torch.einsum("bhtm,bhtmd->bhtd", qf, kv)
        den = torch.einsum("bhtm,bhtm->bht", qf, torch.cumsum(kf, dim=2)).unsqueeze(-1)
        return self.o((num / (den + 1e-6)).transpose(1, 2).reshape(b, t, d))
class Performer(nn.Module):
    def __init__(self, d=64, h=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.pos = nn.Parameter(torch.zeros(T, d))
        self.attn = nn.ModuleList(FavorAttention(d, h) for _ in range(layers))
        self.mlp = nn.ModuleList(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d)) for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.head = nn.Linear(d, V)
    def forward(self, ids):
        x = self.emb(ids) + self.pos
        for attn, mlp, ln in zip(self.attn, self.mlp, self.norms):
            x = x + attn(ln(x))
            x = x + mlp(x)
        logits = self.head(x)
        return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
def build_model():
    return Performer()
def example_batch(b):
    return {"ids": torch.randint(0, V, (b, T), generator=torch.Generator().manual_seed(0))}
