"""Hand-written top-2 MoE: each expert runs on the tokens routed to it (picked by torch.where)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class MoE(nn.Module):
    def __init__(self, d, n=4, k=2):
        super().__init__()
        self.gate = nn.Linear(d, n, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d)) for _ in range(n))
        self.k = k
    def forward(self, x):
        b, t, d = x.shape
        x = x.reshape(-1, d)
        w, idx = self.gate(x).softmax(-1).topk(self.k, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            tok, slot = torch.where(idx == e)
            out.index_add_(0, tok, expert(x[tok]) * w[tok, slot, None])
        return out.reshape(b, t, d)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.blocks = nn.ModuleList(nn.ModuleDict({"ln": nn.LayerNorm(32), "moe": MoE(32)}) for _ in range(2))
        self.head = nn.Linear(32, 100)
    def forward(self, ids, y):
        h = self.emb(ids)
        for b in self.blocks:
            h = h + b["moe"](b["ln"](h))
        return F.cross_entropy(self.head(h).flatten(0, 1), y.flatten())
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 100, (b, 8), generator=g), "y": torch.randint(0, 100, (b, 8), generator=g)}
