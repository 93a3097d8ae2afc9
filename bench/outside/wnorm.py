"""A WaveNet-like stack of dilated Conv1d with weight-norm parametrizations, gated tanh*sigmoid, in-place residual add."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.nn.utils.parametrizations import weight_norm
BATCH_SIZE = 4
class Layer(nn.Module):
    def __init__(self, c, d):
        super().__init__()
        self.conv = weight_norm(nn.Conv1d(c, 2 * c, 3, dilation=d, padding=d))
        self.res = weight_norm(nn.Conv1d(c, c, 1))
    def forward(self, x):
        a, b = self.conv(x).chunk(2, dim=1)
        h = torch.tanh(a) * torch.sigmoid(b)
        out = self.res(h)
        out += x
        return out
class Net(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.emb = nn.Embedding(256, c)
        self.layers = nn.ModuleList([Layer(c, 2 ** i) for i in range(6)])
        self.head = nn.Conv1d(c, 256, 1)
    def forward(self, audio):
        x = self.emb(audio[:, :-1]).transpose(1, 2)
        for l in self.layers:
            x = l(x)
        return F.cross_entropy(self.head(F.relu(x)), audio[:, 1:])
def build_model():
    return Net()
def example_batch(b):
    return {"audio": torch.randint(0, 256, (b, 257), generator=torch.Generator().manual_seed(0))}
