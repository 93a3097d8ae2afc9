"""A hand-written small ResNet on 24 x 24 images whose convolution weights are all weight-standardised through torch.nn.utils.parametrize.register_parametrization (a Standardize module: each output channel's weight minus its mean over the fan-in, divided by its standard deviation + 1e-5, recomputed from the raw "original" parameter at every access in forward), a 3x3 stem conv to 16 channels + GroupNorm(4) + ReLU, three basic residual blocks (two standardised 3x3 convs with GroupNorm, the second block strided to 32 channels with a standardised 1x1 projection shortcut), global average pooling, a hidden linear layer wrapped by torch.nn.utils.parametrizations.spectral_norm (one power iteration per forward in training, updating its u/v buffers in place: state changed once per forward) + ReLU and a linear classifier to 10 classes; cross-entropy in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import spectral_norm
BATCH_SIZE = 4
class Standardize(nn.Module):
    def forward(self, w):
        flat = w.flatten(1)
        mean = flat.mean(1).view(-1, 1, 1, 1)
        std = flat.std(1).view(-1, 1, 1, 1)
        return (w - mean) / (std + 1e-5)
def conv(cin, cout, k, stride=1):
    c = nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)
    parametrize.register_parametrization(c, "weight", Standardize())
    return c
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.g1 = conv(cin, cout, 3, stride), nn.GroupNorm(4, cout)
        self.c2, self.g2 = conv(cout, cout, 3), nn.GroupNorm(4, cout)
        self.short = None if stride == 1 and cin == cout else conv(cin, cout, 1, stride)
    def forward(self, x):
        h = F.relu(self.g1(self.c1(x)))
        h = self.g2(self.c2(h))
        return F.relu(h + (x if self.short is None else self.short(x)))
class StdResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(conv(3, 16, 3), nn.GroupNorm(4, 16), nn.ReLU())
        self.blocks = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 32, 1))
        self.hidden = spectral_norm(nn.Linear(32, 32))
        self.fc = nn.Linear(32, 10)
    def forward(self, x):
        h = self.blocks(self.stem(x)).mean((2, 3))
        return self.fc(F.relu(self.hidden(h)))
def build_model():
    return StdResNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 24, 24, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
