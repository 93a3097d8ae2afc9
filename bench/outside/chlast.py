"""A small CNN whose model and inputs are channels_last (model.to(memory_format=torch.channels_last)), with in-place ReLU and a residual add."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)), inplace=True)
        y = self.b2(self.c2(y))
        return F.relu(y + x, inplace=True)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, padding=1)
        self.blocks = nn.Sequential(*[Block(32) for _ in range(4)])
        self.fc = nn.Linear(32, 10)
    def forward(self, x, y):
        h = self.blocks(self.stem(x))
        return F.cross_entropy(self.fc(h.mean((2, 3))), y)
def build_model():
    return Net().to(memory_format=torch.channels_last)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 3, 32, 32, generator=g).to(memory_format=torch.channels_last), "y": torch.randint(0, 10, (b,), generator=g)}
