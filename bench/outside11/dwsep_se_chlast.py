"""A hand-written MobileNet/EfficientNet-like CNN run in channels_last memory format (the model converted with .to(memory_format=torch.channels_last) in build_model and the 3 x 48 x 48 input made channels_last in example_batch): a strided 3x3 stem conv + BatchNorm2d + SiLU, then five depthwise-separable blocks (a depthwise 3x3 conv with groups=channels and stride 1 or 2, BatchNorm, SiLU, then a squeeze-excitation gate: adaptive average pool, 1x1 conv reduce, SiLU, 1x1 conv expand, sigmoid, applied in place to the activation with x.mul_(gate) (the gate broadcast over H and W), then a pointwise 1x1 conv + BatchNorm, no activation, and an identity residual added in place with out.add_(x) where shape and stride allow), channels 16 -> 24 -> 32 -> 32 -> 48; a 1x1 head conv to 64 + BatchNorm + SiLU, global average pool, a linear classifier to 10 classes; the cross-entropy is in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class SE(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.reduce = nn.Conv2d(c, max(4, c // r), 1)
        self.expand = nn.Conv2d(max(4, c // r), c, 1)
    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return torch.sigmoid(self.expand(F.silu(self.reduce(s))))
class DWSep(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.se = SE(cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.residual = stride == 1 and cin == cout
    def forward(self, x):
        h = F.silu(self.bn1(self.dw(x)))
        h.mul_(self.se(h))
        out = self.bn2(self.pw(h))
        if self.residual:
            out.add_(x)
        return out
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        self.blocks = nn.Sequential(DWSep(16, 16, 1), DWSep(16, 24, 2), DWSep(24, 32, 2), DWSep(32, 32, 1), DWSep(32, 48, 2))
        self.head = nn.Sequential(nn.Conv2d(48, 64, 1, bias=False), nn.BatchNorm2d(64), nn.SiLU())
        self.fc = nn.Linear(64, 10)
    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(x.mean((2, 3)))
def build_model():
    return Net().to(memory_format=torch.channels_last)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, 3, 48, 48, generator=g).contiguous(memory_format=torch.channels_last)
    return x, torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
