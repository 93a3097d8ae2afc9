"""A small MobileNetV2 (Sandler et al.): inverted residuals with depthwise convolutions and in-place
ReLU6; CIFAR-sized inputs. Plain torch."""
import torch
from torch import nn
BATCH_SIZE = 4
class Inv(nn.Module):
    def __init__(self, cin, cout, stride, t=4):
        super().__init__()
        h = cin * t
        self.res = stride == 1 and cin == cout
        self.conv = nn.Sequential(
            nn.Conv2d(cin, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6(inplace=True),
            nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6(inplace=True),
            nn.Conv2d(h, cout, 1, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        return x + self.conv(x) if self.res else self.conv(x)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        cfg = [(8, 8, 1), (8, 12, 2), (12, 12, 1), (12, 16, 2), (16, 16, 1), (16, 16, 1), (16, 24, 1)]
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(inplace=True),
                                      *[Inv(a, b, s) for a, b, s in cfg])
        self.classifier = nn.Sequential(nn.Dropout(0.0), nn.Linear(24, 10))
    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return nn.functional.cross_entropy(out, y)
