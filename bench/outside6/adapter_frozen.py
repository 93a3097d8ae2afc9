"""Adapter fine-tuning of a frozen pretrained-style transformer encoder: the embedding, six TransformerEncoderLayers and the final LayerNorm all requires_grad=False, trainable bottleneck adapters (down-project, GELU, up-project, residual) after the 2nd and 4th layers, a trainable classifier head; the gradient runs back through frozen layers to the first adapter, the layers before it need none."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Adapter(nn.Module):
    def __init__(self, d, r=8):
        super().__init__()
        self.down = nn.Linear(d, r)
        self.up = nn.Linear(r, d)
        nn.init.normal_(self.up.weight, std=1e-2)
        nn.init.zeros_(self.up.bias)
    def forward(self, x):
        return x + self.up(F.gelu(self.down(x)))
class AdaptedEncoder(nn.Module):
    def __init__(self, vocab=256, d=64, n_layers=6, n_cls=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(32, d) * 0.02)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(d, 4, 128, dropout=0.0, batch_first=True, norm_first=True)
                                    for _ in range(n_layers))
        self.norm = nn.LayerNorm(d)
        for p in self.parameters():  # the "pretrained" backbone
            p.requires_grad_(False)
        self.adapters = nn.ModuleDict({"1": Adapter(d), "3": Adapter(d)})
        self.head = nn.Linear(d, n_cls)
    def forward(self, ids, labels):
        h = self.emb(ids) + self.pos[: ids.shape[1]]
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if str(i) in self.adapters:
                h = self.adapters[str(i)](h)
        return F.cross_entropy(self.head(self.norm(h).mean(1)), labels)
def build_model():
    return AdaptedEncoder()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 256, (b, 32), generator=g), "labels": torch.randint(0, 4, (b,), generator=g)}
