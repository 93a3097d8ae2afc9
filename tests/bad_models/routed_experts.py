"""A hand-written top-2 mixture of experts: each expert runs on the tokens routed to it, picked with
torch.where on the routing (sizes that depend on values: no plan can size the step ahead of the batch)."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 8


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
        self.moe = MoE(32)
        self.head = nn.Linear(32, 100)

    def forward(self, ids, y):
        h = self.emb(ids)
        h = h + self.moe(h)
        return F.cross_entropy(self.head(h).flatten(0, 1), y.flatten())


def build_model():
    return Net()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 100, (b, 8), generator=g), "y": torch.randint(0, 100, (b, 8), generator=g)}
