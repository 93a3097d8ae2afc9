"""BitFit: a small transformer classifier (token embedding, four TransformerEncoderLayers) in which only the biases, the LayerNorms' parameters and the head train; every weight matrix is requires_grad=False, so backward needs the activations for bias and norm gradients but no weight gradient."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class BitFitEncoder(nn.Module):
    def __init__(self, vocab=512, d=64, n_layers=4, n_cls=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(64, d)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(d, 4, 192, dropout=0.0, activation="gelu", batch_first=True)
                                    for _ in range(n_layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, n_cls)
        for name, p in self.named_parameters():
            p.requires_grad_("bias" in name or "norm" in name or name.startswith("head."))
    def forward(self, ids, labels):
        h = self.emb(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for layer in self.layers:
            h = layer(h)
        return F.cross_entropy(self.head(self.norm(h[:, 0])), labels)
def build_model():
    return BitFitEncoder()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 512, (b, 48), generator=g), "labels": torch.randint(0, 3, (b,), generator=g)}
