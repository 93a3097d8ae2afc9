"""An EfficientNet-like CNN: SiLU(inplace), squeeze-excite, depthwise convs, `x += shortcut` in place."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class SE(nn.Module):
    def __init__(self, c):
        super().__init__(); self.fc1 = nn.Conv2d(c, c // 4, 1); self.fc2 = nn.Conv2d(c // 4, c, 1)
    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        s = torch.sigmoid(self.fc2(F.silu(self.fc1(s), inplace=True)))
        return x * s
class MB(nn.Module):
    def __init__(self, c, e=4, stride=1):
        super().__init__()
        h = c * e
        self.expand = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.SiLU(inplace=True))
        self.dw = nn.Sequential(nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.SiLU(inplace=True))
        self.se = SE(h)
        self.proj = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))
        self.res = stride == 1
    def forward(self, x):
        y = self.proj(self.se(self.dw(self.expand(x))))
        if self.res:
            y += x
        return y
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU(inplace=True))
        self.blocks = nn.Sequential(*[MB(16) for _ in range(4)])
        self.head = nn.Linear(16, 10)
    def forward(self, x, y):
        z = self.blocks(self.stem(x))
        z = F.adaptive_avg_pool2d(z, 1).flatten(1)
        return F.cross_entropy(self.head(z), y)
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 3, 32, 32, generator=g), "y": torch.randint(0, 10, (b,), generator=g)}
