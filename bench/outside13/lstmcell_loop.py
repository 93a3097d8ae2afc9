"""A hand-written character language model that unrolls one nn.LSTMCell over 24 time steps in a Python loop (the same cell module called 24 times), with variational dropout (one dropout mask drawn per sequence and multiplied into the hidden state at every step), a residual projection of each step's input added to its output, the outputs stacked and a linear decoder whose weight is tied to the embedding; shifted cross-entropy over the sequence in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, D, T = 96, 32, 24
class CharLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.cell = nn.LSTMCell(D, D)
        self.skip = nn.Linear(D, D)
        self.dec = nn.Linear(D, V)
        self.dec.weight = self.emb.weight
    def forward(self, ids):
        x = self.emb(ids)
        b = ids.shape[0]
        h = x.new_zeros(b, D)
        c = x.new_zeros(b, D)
        mask = F.dropout(x.new_ones(b, D), 0.2, self.training)
        outs = []
        for t in range(ids.shape[1]):
            h, c = self.cell(x[:, t], (h * mask, c))
            outs.append(h + self.skip(x[:, t]))
        return self.dec(torch.stack(outs, 1))
def build_model():
    return CharLM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (b, T + 1), generator=g)
    return ids[:, :-1], ids[:, 1:]
def loss_fn(out, y):
    return F.cross_entropy(out.reshape(-1, V), y.reshape(-1))
