"""Hand-written top-2 MoE with dense dispatch (one-hot combine weights, einsum over stacked expert weights) and a load-balancing auxiliary loss added to the loss; returns (loss, logits)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class MoE(nn.Module):
    def __init__(self, d, n=4, k=2):
        super().__init__()
        self.gate = nn.Linear(d, n, bias=False)
        self.w1 = nn.Parameter(torch.randn(n, d, 2 * d) * d ** -0.5)
        self.w2 = nn.Parameter(torch.randn(n, 2 * d, d) * (2 * d) ** -0.5)
        self.n, self.k = n, k
    def forward(self, x):
        p = self.gate(x).softmax(-1)
        w, idx = p.topk(self.k, dim=-1)
        combine = torch.zeros_like(p).scatter(-1, idx, w / w.sum(-1, keepdim=True))
        h = F.silu(torch.einsum("btd,edf->btef", x, self.w1))
        y = torch.einsum("btef,efd->bted", h, self.w2)
        frac = F.one_hot(idx[..., 0], self.n).float().mean((0, 1))
        aux = self.n * (frac * p.mean((0, 1))).sum()
        return torch.einsum("bted,bte->btd", y, combine), aux
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.moes = nn.ModuleList(MoE(32) for _ in range(3))
        self.norms = nn.ModuleList(nn.LayerNorm(32) for _ in range(3))
        self.head = nn.Linear(32, 100)
    def forward(self, ids, y):
        h, aux = self.emb(ids), 0.0
        for ln, moe in zip(self.norms, self.moes):
            o, a = moe(ln(h))
            h, aux = h + o, aux + a
        logits = self.head(h)
        return F.cross_entropy(logits.flatten(0, 1), y.flatten()) + 0.01 * aux, logits
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 100, (b, 8), generator=g), "y": torch.randint(0, 100, (b, 8), generator=g)}
