"""DLRM-like recommender: EmbeddingBag tables (sum), a bottom MLP on dense features, pairwise dot interactions (bmm + triu indices), a top MLP, BCE-with-logits."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class DLRM(nn.Module):
    def __init__(self, tables=(1000, 500, 200), d=16):
        super().__init__()
        self.embs = nn.ModuleList(nn.EmbeddingBag(n, d, mode="sum") for n in tables)
        self.bottom = nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, d), nn.ReLU())
        f = len(tables) + 1
        self.register_buffer("li", torch.triu_indices(f, f, 1)[0], persistent=False)
        self.register_buffer("lj", torch.triu_indices(f, f, 1)[1], persistent=False)
        self.top = nn.Sequential(nn.Linear(d + f * (f - 1) // 2, 64), nn.ReLU(), nn.Linear(64, 1))
    def forward(self, dense, sparse):
        x = self.bottom(dense)
        feats = torch.stack([x] + [e(sparse[:, i]) for i, e in enumerate(self.embs)], 1)
        z = torch.bmm(feats, feats.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, z], 1)).squeeze(1)
def build_model():
    return DLRM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    inputs = (torch.randn(b, 13, generator=g), torch.randint(0, 200, (b, 3, 5), generator=g))
    return inputs, torch.randint(0, 2, (b,), generator=g).float()
def loss_fn(out, y):
    return F.binary_cross_entropy_with_logits(out, y)
