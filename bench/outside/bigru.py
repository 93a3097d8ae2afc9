"""A 2-layer bidirectional GRU tagger with a shared embedding-tied output."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.rnn = nn.GRU(32, 16, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(32, 100)
        self.out.weight = self.emb.weight
    def forward(self, ids, tags):
        h, _ = self.rnn(self.emb(ids))
        return F.cross_entropy(self.out(h).flatten(0, 1), tags.flatten())
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 100, (b, 20), generator=g), "tags": torch.randint(0, 100, (b, 20), generator=g)}
