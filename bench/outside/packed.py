"""An LSTM classifier over variable-length sequences with pack_padded_sequence."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.rnn = nn.LSTM(32, 48, batch_first=True)
        self.out = nn.Linear(48, 5)
    def forward(self, x, lengths, y):
        packed = pack_padded_sequence(self.emb(x), lengths, batch_first=True, enforce_sorted=False)
        _, (h, _) = self.rnn(packed)
        return F.cross_entropy(self.out(h[-1]), y)
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randint(1, 100, (b, 20), generator=g), "lengths": torch.randint(5, 21, (b,), generator=g),
            "y": torch.randint(0, 5, (b,), generator=g)}
