"""A Transformer-XL-like segment model: the previous segment's hidden states are kept on the module (self.mem = h.detach()) and attended to by the next call, an attribute assigned in forward."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class SegLM(nn.Module):
    def __init__(self, vocab=64, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))
        self.head = nn.Linear(d, vocab)
        self.mem = None
    def forward(self, ids, tgt):
        x = self.emb(ids)
        ctx = x if self.mem is None or self.mem.shape[0] != x.shape[0] else torch.cat([self.mem, x], 1)
        h = x + self.attn(x, ctx, ctx, need_weights=False)[0]
        h = h + self.ff(h)
        self.mem = h.detach()
        return F.cross_entropy(self.head(h).flatten(0, 1), tgt.flatten())
def build_model():
    return SegLM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 64, (b, 12), generator=g), "tgt": torch.randint(0, 64, (b, 12), generator=g)}
