"""Cross-attention with nn.MultiheadAttention (need_weights left at its default True), a query set attending to image patches."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Perceiver(nn.Module):
    def __init__(self, d=64, q=8):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.queries = nn.Parameter(torch.randn(q, d))
        self.xattn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.self_attn = nn.ModuleList([nn.MultiheadAttention(d, 4, batch_first=True) for _ in range(2)])
        self.norms = nn.ModuleList([nn.LayerNorm(d) for _ in range(3)])
        self.head = nn.Linear(d, 10)
    def forward(self, img, label):
        kv = self.patch(img).flatten(2).transpose(1, 2)
        q = self.queries.expand(img.shape[0], -1, -1)
        h, _ = self.xattn(q, kv, kv)
        h = self.norms[0](h + q)
        for attn, norm in zip(self.self_attn, self.norms[1:]):
            a, w = attn(h, h, h)
            h = norm(h + a)
        return F.cross_entropy(self.head(h.mean(1)), label)
def build_model():
    return Perceiver()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"img": torch.randn(b, 3, 32, 32, generator=g), "label": torch.randint(0, 10, (b,), generator=g)}
