"""SimSiam-like: two views through one encoder (reused), a predictor, stop-gradient by detach."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.Conv2d(16, 32, 3, 2, 1),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 32))
        self.pred = nn.Sequential(nn.Linear(32, 16), nn.ReLU(inplace=True), nn.Linear(16, 32))
    def forward(self, a, b):
        za, zb = self.enc(a), self.enc(b)
        pa, pb = self.pred(za), self.pred(zb)
        return -(F.cosine_similarity(pa, zb.detach()).mean() + F.cosine_similarity(pb, za.detach()).mean()) / 2
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, 3, 32, 32, generator=g)
    return {"a": x + 0.1 * torch.randn(x.shape, generator=g), "b": x.flip(-1)}
