"""SegNet-like encoder-decoder: MaxPool2d(return_indices=True) in the encoder, MaxUnpool2d with those indices in the decoder, BatchNorm + ReLU(inplace=True), per-pixel cross-entropy with ignore_index."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
def cbr(i, o):
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True))
class SegNet(nn.Module):
    def __init__(self, k=5):
        super().__init__()
        self.e1, self.e2, self.e3 = cbr(3, 16), cbr(16, 32), cbr(32, 64)
        self.pool = nn.MaxPool2d(2, 2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2, 2)
        self.d3, self.d2, self.d1 = cbr(64, 32), cbr(32, 16), nn.Conv2d(16, k, 3, padding=1)
    def forward(self, x):
        x, i1 = self.pool(self.e1(x))
        x, i2 = self.pool(self.e2(x))
        x, i3 = self.pool(self.e3(x))
        x = self.d3(self.unpool(x, i3))
        x = self.d2(self.unpool(x, i2))
        return self.d1(self.unpool(x, i1))
def build_model():
    return SegNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 5, (b, 32, 32), generator=g)
    y[:, :2] = 255
    return torch.randn(b, 3, 32, 32, generator=g), y
def loss_fn(out, y):
    return F.cross_entropy(out, y, ignore_index=255)
