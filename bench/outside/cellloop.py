"""A hand-unrolled LSTMCell loop over time (one cell module called at every step) with attention pooling."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.emb = nn.Embedding(50, 16); self.cell = nn.LSTMCell(16, 24); self.att = nn.Linear(24, 1); self.out = nn.Linear(24, 3)
    def forward(self, ids, y):
        x = self.emb(ids); h = x.new_zeros(x.size(0), 24); c = torch.zeros_like(h); hs = []
        for t in range(x.size(1)):
            h, c = self.cell(x[:, t], (h, c)); hs.append(h)
        H = torch.stack(hs, 1)
        w = torch.softmax(self.att(H), 1)
        return F.cross_entropy(self.out((w * H).sum(1)), y)
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 50, (b, 12), generator=g), "y": torch.randint(0, 3, (b,), generator=g)}
