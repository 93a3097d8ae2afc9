"""An Inception-like CNN: blocks of four parallel branches (1x1, 1x1->3x3, 1x1->5x5 as two 3x3, pool->1x1) concatenated, BasicConv2d with BatchNorm(eps=0.001) and ReLU(inplace=True), an auxiliary classifier on a middle block; forward returns (logits, aux_logits) in training and loss_fn weights the auxiliary loss by 0.4."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class BasicConv2d(nn.Module):
    def __init__(self, i, o, **kw):
        super().__init__()
        self.conv = nn.Conv2d(i, o, bias=False, **kw); self.bn = nn.BatchNorm2d(o, eps=0.001)
    def forward(self, x):
        return F.relu(self.bn(self.conv(x)), inplace=True)
class Inception(nn.Module):
    def __init__(self, i, c1, c3r, c3, c5r, c5, pp):
        super().__init__()
        self.b1 = BasicConv2d(i, c1, kernel_size=1)
        self.b2 = nn.Sequential(BasicConv2d(i, c3r, kernel_size=1), BasicConv2d(c3r, c3, kernel_size=3, padding=1))
        self.b3 = nn.Sequential(BasicConv2d(i, c5r, kernel_size=1), BasicConv2d(c5r, c5, kernel_size=3, padding=1), BasicConv2d(c5, c5, kernel_size=3, padding=1))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True), BasicConv2d(i, pp, kernel_size=1))
    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)
class Aux(nn.Module):
    def __init__(self, i, n):
        super().__init__()
        self.conv = BasicConv2d(i, 16, kernel_size=1); self.fc1 = nn.Linear(16 * 4 * 4, 64); self.fc2 = nn.Linear(64, n)
    def forward(self, x):
        x = self.conv(F.adaptive_avg_pool2d(x, (4, 4)))
        return self.fc2(F.dropout(F.relu(self.fc1(torch.flatten(x, 1)), inplace=True), 0.0, training=self.training))
class Net(nn.Module):
    def __init__(self, n=10):
        super().__init__()
        self.stem = nn.Sequential(BasicConv2d(3, 32, kernel_size=3, stride=2, padding=1), BasicConv2d(32, 48, kernel_size=3, padding=1))
        self.i3a = Inception(48, 16, 24, 32, 4, 8, 8); self.i3b = Inception(64, 32, 32, 48, 8, 24, 16)
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.i4a = Inception(120, 48, 24, 52, 4, 12, 16); self.aux = Aux(128, n)
        self.i4b = Inception(128, 40, 28, 56, 6, 16, 16)
        self.fc = nn.Linear(128, n)
    def forward(self, x):
        x = self.i3b(self.i3a(self.stem(x)))
        x = self.i4a(self.pool(x))
        aux = self.aux(x) if self.training else None
        x = self.i4b(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)), aux
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    logits, aux = out
    return F.cross_entropy(logits, y) + 0.4 * F.cross_entropy(aux, y)
