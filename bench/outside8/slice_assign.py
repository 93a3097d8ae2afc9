"""A hand-written transformer encoder in an older style: attention scores masked in place (scores.masked_fill_(pad_mask, -1e4) on the matmul's output) before softmax, a half-channel gate written into a slice of a fresh buffer in place (h[..., :d] = gelu(...); h[..., d:] = ...), a positional table added in place to the embedding (x += pos), and a token loss with label smoothing 0.1 and ignore_index -100 on padded positions."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up_a, self.up_b, self.down = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(2 * d, d)
    def forward(self, x, pad):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / (d // self.h) ** 0.5
        scores.masked_fill_(pad[:, None, None, :], -1e4)
        a = scores.softmax(-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        y = self.ln2(x)
        h = x.new_empty(b, t, 2 * d)
        h[..., :d] = F.gelu(self.up_a(y))
        h[..., d:] = torch.sigmoid(self.up_b(y)) * y
        return x + self.down(h)
class Model(nn.Module):
    def __init__(self, vocab=96, d=64, heads=4, layers=3, seq=24):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.out = nn.Linear(d, vocab)
    def forward(self, tokens, labels):
        pad = tokens == 0
        x = self.emb(tokens)
        x += self.pos
        for blk in self.blocks:
            x = blk(x, pad)
        logits = self.out(x)
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, label_smoothing=0.1)
def build_model():
    return Model()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, 96, (b, 24), generator=g)
    tokens[:, 18:] = 0
    labels = torch.randint(1, 96, (b, 24), generator=g)
    labels[tokens == 0] = -100
    return {"tokens": tokens, "labels": labels}
