"""A sequence classifier on nn.MultiheadAttention called with need_weights=False and a key_padding_mask from the batch: a learned [CLS] token expanded and concatenated in front, a learned positional table sliced to the batch's length (pos[:t]), the [CLS] output classified."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, T, MAXLEN = 100, 20, 64
class Layer(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))
    def forward(self, x, pad):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, key_padding_mask=pad, need_weights=False)[0]
        return x + self.ff(self.ln2(x))
class Classifier(nn.Module):
    def __init__(self, d=64, h=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, d, padding_idx=0)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(MAXLEN, d) * 0.02)
        self.layers = nn.ModuleList(Layer(d, h) for _ in range(layers))
        self.head = nn.Linear(d, 3)
    def forward(self, ids, label):
        b, t = ids.shape
        x = torch.cat([self.cls.expand(b, -1, -1), self.emb(ids)], 1) + self.pos[:t + 1]
        pad = torch.cat([torch.zeros(b, 1, dtype=torch.bool), ids == 0], 1)
        for layer in self.layers:
            x = layer(x, pad)
        return F.cross_entropy(self.head(x[:, 0]), label)
def build_model():
    return Classifier()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, V, (b, T), generator=g)
    lengths = torch.randint(8, T + 1, (b,), generator=g)
    ids[torch.arange(T).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    return {"ids": ids, "label": torch.randint(0, 3, (b,), generator=g)}
