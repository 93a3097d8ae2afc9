"""A time-first RNN tagger (nn.GRU with batch_first=False, the default): the batch comes batch-first and forward transposes it; bidirectional 2-layer GRU, per-token cross-entropy."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(200, 24)
        self.rnn = nn.GRU(24, 32, num_layers=2, bidirectional=True)
        self.out = nn.Linear(64, 9)
    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids.t()))
        return self.out(h).transpose(0, 1)
def build_model():
    return Tagger()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 200, (b, 20), generator=g), torch.randint(0, 9, (b, 20), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out.reshape(-1, 9), y.reshape(-1))
