"""A detector-style backbone with frozen batch norm: train() is overridden to keep every BatchNorm2d in eval mode (running statistics used, not updated) and the stem's parameters frozen (requires_grad False); forward hooks collect two feature maps for a two-scale head; deep supervision adds an auxiliary head's loss."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
def cbr(i, o, s=1):
    return nn.Sequential(nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True))
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = cbr(3, 16, 2)
        self.layer1, self.layer2 = nn.Sequential(cbr(16, 24), cbr(24, 24)), nn.Sequential(cbr(24, 32, 2), cbr(32, 32))
        self.head = nn.Linear(24 + 32, 10)
        self.aux = nn.Linear(24, 10)
        for p in self.stem.parameters():
            p.requires_grad_(False)
        self.feats = {}
        self.layer1.register_forward_hook(lambda m, i, o: self.feats.__setitem__("c1", o))
        self.layer2.register_forward_hook(lambda m, i, o: self.feats.__setitem__("c2", o))
    def train(self, mode=True):
        super().train(mode)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()
        return self
    def forward(self, x, y):
        self.layer2(self.layer1(self.stem(x)))
        c1, c2 = self.feats["c1"].mean((2, 3)), self.feats["c2"].mean((2, 3))
        return F.cross_entropy(self.head(torch.cat([c1, c2], 1)), y) + 0.4 * F.cross_entropy(self.aux(c1), y)
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 3, 32, 32, generator=g), "y": torch.randint(0, 10, (b,), generator=g)}
