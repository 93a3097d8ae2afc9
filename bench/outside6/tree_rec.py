"""A recursive neural network over a fixed binary tree: eight leaf token embeddings combined pairwise by one composition module (a gated Linear over [left; right]) called recursively by a Python function over a depth-3 tree, seven calls of the same module, the root classified."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Compose(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(2 * d, 2 * d)
        self.ln = nn.LayerNorm(d)
    def forward(self, left, right):
        h, gate = self.lin(torch.cat([left, right], -1)).chunk(2, -1)
        return self.ln(torch.sigmoid(gate) * torch.tanh(h) + 0.5 * (left + right))
class TreeRNN(nn.Module):
    def __init__(self, vocab=300, d=64, n_cls=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.compose = Compose(d)
        self.head = nn.Linear(d, n_cls)
    def reduce(self, leaves, lo, hi):
        if hi - lo == 1:
            return leaves[:, lo]
        mid = (lo + hi) // 2
        return self.compose(self.reduce(leaves, lo, mid), self.reduce(leaves, mid, hi))
    def forward(self, tokens, labels):
        root = self.reduce(self.emb(tokens), 0, tokens.shape[1])
        return F.cross_entropy(self.head(root), labels)
def build_model():
    return TreeRNN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"tokens": torch.randint(0, 300, (b, 8), generator=g), "labels": torch.randint(0, 5, (b,), generator=g)}
