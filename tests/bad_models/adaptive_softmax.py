"""(bench/outside5) An LSTM language model with nn.AdaptiveLogSoftmaxWithLoss: a frequent-word head plus two tail clusters with reduced projections; inside, each cluster's targets are picked by boolean masks and nonzero() (shapes that depend on the labels' values)."""
import torch, torch.nn as nn
BATCH_SIZE = 4
V, T = 1000, 16
class AdaLM(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.rnn = nn.LSTM(d, d, batch_first=True)
        self.out = nn.AdaptiveLogSoftmaxWithLoss(d, V, cutoffs=[100, 400], div_value=2.0)
    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids[:, :-1]))
        return self.out(h.reshape(-1, h.shape[-1]), ids[:, 1:].reshape(-1)).loss
def build_model():
    return AdaLM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    # Zipf-like ids: most frequent, some in each tail cluster
    ids = (torch.rand(b, T, generator=g) ** 3 * V).long().clamp(max=V - 1)
    return {"ids": ids}
