"""A hashed bag-of-n-grams text classifier dominated by one very wide layer: Linear(2048, 384) over the hashed count vector holds about 97% of the parameters, then two small layers; the activations are tiny next to that one weight and its gradient."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class WideClassifier(nn.Module):
    def __init__(self, n_hash=2048, d=384, n_cls=10):
        super().__init__()
        self.wide = nn.Linear(n_hash, d)
        self.mid = nn.Linear(d, 64)
        self.head = nn.Linear(64, n_cls)
    def forward(self, counts, labels):
        h = F.relu(self.wide(torch.log1p(counts)))
        return F.cross_entropy(self.head(F.relu(self.mid(h))), labels)
def build_model():
    return WideClassifier()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    counts = torch.zeros(b, 2048).scatter_add_(1, torch.randint(0, 2048, (b, 60), generator=g), torch.ones(b, 60))
    return {"counts": counts, "labels": torch.randint(0, 10, (b,), generator=g)}
