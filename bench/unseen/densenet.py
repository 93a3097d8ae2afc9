"""A small DenseNet (Huang et al.): dense blocks whose layers read the concatenation of every earlier
layer's output, transitions between them, in-place ReLUs; CIFAR-sized inputs. Plain torch."""
import torch
from torch import nn
BATCH_SIZE = 4
class Dense(nn.Module):
    def __init__(self, cin, g):
        super().__init__()
        self.bn1, self.relu1 = nn.BatchNorm2d(cin), nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(cin, 2 * g, 1, bias=False)
        self.bn2, self.relu2 = nn.BatchNorm2d(2 * g), nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(2 * g, g, 3, padding=1, bias=False)
    def forward(self, feats):
        x = torch.cat(feats, 1)
        return self.conv2(self.relu2(self.bn2(self.conv1(self.relu1(self.bn1(x))))))
class Block(nn.Module):
    def __init__(self, n, cin, g):
        super().__init__()
        self.layers = nn.ModuleList(Dense(cin + i * g, g) for i in range(n))
    def forward(self, x):
        feats = [x]
        for l in self.layers:
            feats.append(l(feats))
        return torch.cat(feats, 1)
class Net(nn.Module):
    def __init__(self, g=8):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        c = 16
        mods = []
        for i, n in enumerate((3, 4, 3)):
            mods.append(Block(n, c, g)); c += n * g
            if i < 2:
                mods.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2)))
                c //= 2
        self.features = nn.Sequential(*mods)
        self.head = nn.Linear(c, 10)
    def forward(self, x):
        x = self.features(self.stem(x))
        return self.head(torch.relu(x).mean((2, 3)))
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return nn.functional.cross_entropy(out, y)
