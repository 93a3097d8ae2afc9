"""A sequence tagger on nn.LSTM with projections (proj_size=16: each step's hidden state is projected down from 64 before it is fed back and output), 2 layers, bidirectional, batch_first, over an embedded sequence of 32 tokens, then a per-step linear head; the inputs are a (tokens, tags) pair and a loss_fn computes the per-step cross-entropy over 7 tags."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class ProjTagger(nn.Module):
    def __init__(self, vocab=100, n_tags=7):
        super().__init__()
        self.emb = nn.Embedding(vocab, 32)
        self.lstm = nn.LSTM(input_size=32, hidden_size=64, proj_size=16, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * 16, n_tags)
    def forward(self, tokens):
        out, _ = self.lstm(self.emb(tokens))
        return self.head(out)
def build_model():
    return ProjTagger()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return (torch.randint(0, 100, (b, 32), generator=g),), torch.randint(0, 7, (b, 32), generator=g)
def loss_fn(out, target):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
