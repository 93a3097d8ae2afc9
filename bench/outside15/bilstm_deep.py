"""A hand-written sequence classifier: token embeddings (vocab 64, width 16) of a 20-step sequence fed to one 3-layer bidirectional nn.LSTM (hidden 32 per direction, batch_first, dropout 0.2 between the stacked layers: random draws in forward), attention pooling over time (a linear layer scores each step's 64-wide output, softmax over the 20 steps, the weighted sum of the outputs), then LayerNorm and a 64 -> 5 linear classifier; cross-entropy in loss_fn. No batch norm, no buffers."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, T = 64, 20
class BiLSTMCls(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 16)
        self.lstm = nn.LSTM(16, 32, num_layers=3, bidirectional=True, dropout=0.2, batch_first=True)
        self.score = nn.Linear(64, 1)
        self.norm = nn.LayerNorm(64)
        self.cls = nn.Linear(64, 5)
    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        a = torch.softmax(self.score(h).squeeze(-1), dim=1)
        pooled = (a.unsqueeze(-1) * h).sum(1)
        return self.cls(self.norm(pooled))
def build_model():
    return BiLSTMCls()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, V, (b, T), generator=g), torch.randint(0, 5, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
