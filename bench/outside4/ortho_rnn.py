"""An RNN whose recurrent matrix is kept orthogonal with torch.nn.utils.parametrizations.orthogonal (matrix_exp), and a classifier head with the new-style spectral_norm parametrization (its power iteration updates buffers in forward)."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.nn.utils import parametrizations as P
BATCH_SIZE = 4
class ORNN(nn.Module):
    def __init__(self, d_in=8, d=32, classes=4):
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.rec = P.orthogonal(nn.Linear(d, d, bias=False))
        self.head = P.spectral_norm(nn.Linear(d, classes))
    def forward(self, x, y):
        h = torch.zeros(x.shape[0], self.inp.out_features)
        for t in range(x.shape[1]):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
        return F.cross_entropy(self.head(h), y)
def build_model():
    return ORNN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 10, 8, generator=g), "y": torch.randint(0, 4, (b,), generator=g)}
