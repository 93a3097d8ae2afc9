"""A learned query set handed on as a view: ``self.queries.expand(b, -1, -1)`` is read by the
cross-attention node and, as the residual, by the norm after it (nn.MultiheadAttention, need_weights
left on). Under ZeRO-3 the queries must stay whole: the next node reads a view of their storage."""
import torch, torch.nn as nn, torch.nn.functional as F

BATCH_SIZE = 4


class Perceiver(nn.Module):
    def __init__(self, d=32, q=8):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.queries = nn.Parameter(torch.randn(q, d))
        self.xattn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, 10)

    def forward(self, img, label):
        kv = self.patch(img).flatten(2).transpose(1, 2)
        q = self.queries.expand(img.shape[0], -1, -1)
        h, _ = self.xattn(q, kv, kv)
        h = self.norm(h + q)
        h = h + self.mlp(h)
        return F.cross_entropy(self.head(h.mean(1)), label)


def build_model():
    torch.manual_seed(0)
    return Perceiver()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"img": torch.randn(b, 3, 16, 16, generator=g), "label": torch.randint(0, 10, (b,), generator=g)}
