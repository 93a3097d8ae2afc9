"""A tied autoencoder: the decoder reuses the encoder's weights transposed (F.linear(h, enc.weight.t())) with its own biases, ParameterList of per-layer scales indexed in a loop, sigmoid output, binary cross-entropy."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class TiedAE(nn.Module):
    def __init__(self, dims=(64, 48, 32, 16)):
        super().__init__()
        self.enc = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.dec_bias = nn.ParameterList(nn.Parameter(torch.zeros(a)) for a in dims[:-1])
        self.scales = nn.ParameterList(nn.Parameter(torch.ones(1)) for _ in dims[1:])
    def forward(self, x):
        h = x
        for i, l in enumerate(self.enc):
            h = torch.relu(l(h)) * self.scales[i]
        for i in reversed(range(len(self.enc))):
            h = F.linear(h, self.enc[i].weight.t(), self.dec_bias[i])
            h = torch.relu(h) if i else torch.sigmoid(h)
        return F.binary_cross_entropy(h, x)
def build_model():
    return TiedAE()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.rand(b, 64, generator=g)}
