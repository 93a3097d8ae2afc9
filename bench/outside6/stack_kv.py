"""A transformer classifier whose attention keeps one nn.Linear per head in nn.ModuleLists: queries, keys and values built by torch.stack of the per-head projections (b, heads, t, d_head), a hand-written softmax attention with a learned per-head temperature, the heads concatenated back with torch.cat."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class PerHeadAttention(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        dh = d // n_heads
        self.q = nn.ModuleList(nn.Linear(d, dh) for _ in range(n_heads))
        self.k = nn.ModuleList(nn.Linear(d, dh) for _ in range(n_heads))
        self.v = nn.ModuleList(nn.Linear(d, dh) for _ in range(n_heads))
        self.log_tau = nn.Parameter(torch.full((n_heads, 1, 1), -0.5 * torch.log(torch.tensor(float(dh))).item()))
        self.out = nn.Linear(d, d)
    def forward(self, x):
        q = torch.stack([p(x) for p in self.q], dim=1)
        k = torch.stack([p(x) for p in self.k], dim=1)
        v = torch.stack([p(x) for p in self.v], dim=1)
        att = torch.softmax(q @ k.transpose(-1, -2) * self.log_tau.exp(), dim=-1)
        o = att @ v  # b, h, t, dh
        return self.out(torch.cat(o.unbind(1), dim=-1))
class Layer(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = PerHeadAttention(d, n_heads)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ff(self.ln2(x))
class StackKV(nn.Module):
    def __init__(self, vocab=200, d=64, n_heads=4, n_layers=3, n_cls=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, 32, d) * 0.02)
        self.layers = nn.ModuleList(Layer(d, n_heads) for _ in range(n_layers))
        self.head = nn.Linear(d, n_cls)
    def forward(self, ids, labels):
        h = self.emb(ids) + self.pos
        for layer in self.layers:
            h = layer(h)
        return F.cross_entropy(self.head(h.mean(1)), labels)
def build_model():
    return StackKV()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 200, (b, 32), generator=g), "labels": torch.randint(0, 4, (b,), generator=g)}
