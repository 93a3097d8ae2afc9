"""An encoder whose pooler is computed and never read (an encoder-decoder's encoder keeps BERT's pooler:
its parameters get no gradient), a token-classification head on the sequence output."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 8


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        self.body = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
        self.pooler = nn.Linear(32, 32)
        self.head = nn.Linear(32, 5)

    def forward(self, ids, y):
        h = self.body(self.emb(ids))
        _ = torch.tanh(self.pooler(h[:, 0]))  # (computed, unread: as HF's encoder-decoders leave it)
        return F.cross_entropy(self.head(h).flatten(0, 1), y.flatten())


def build_model():
    return Net()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 64, (b, 6), generator=g), "y": torch.randint(0, 5, (b, 6), generator=g)}
