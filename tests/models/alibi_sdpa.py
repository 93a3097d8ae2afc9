"""(bench/outside5/alibi_sdpa.py) A decoder-only LM with F.scaled_dot_product_attention given a float attn_mask: ALiBi's per-head linear distance bias (a buffer of slopes) plus the causal -inf mask built in forward with torch.triu and masked_fill, no positional embeddings."""
import math, torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, T = 128, 24
class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    def forward(self, x, bias):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))
class AlibiLM(nn.Module):
    def __init__(self, d=64, h=4, layers=3):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, V, bias=False)
        self.register_buffer("slopes", torch.tensor([2 ** (-8 * (i + 1) / h) for i in range(h)]))
    def forward(self, ids, labels):
        t = ids.shape[1]
        pos = torch.arange(t)
        dist = (pos.view(1, t) - pos.view(t, 1)).float()  # j - i, <= 0 below the diagonal
        bias = self.slopes.view(-1, 1, 1) * dist
        bias = bias.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, bias)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
def build_model():
    return AlibiLM()
def example_batch(b):
    ids = torch.randint(0, V, (b, T), generator=torch.Generator().manual_seed(0))
    return {"ids": ids, "labels": ids}
