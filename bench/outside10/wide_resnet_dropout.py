"""A WideResNet-16-like CIFAR classifier on 32 x 32 images, narrowed to width factor 1 to stay small: a 3x3 stem conv to 16 channels, then three stages of two blocks (16, 32, 64 channels; strides 1, 2, 2) of pre-activation basic blocks (BatchNorm2d with running-stat buffers updated in forward -> in-place ReLU -> 3x3 conv -> BN -> in-place ReLU -> nn.Dropout(p=0.0) -> 3x3 conv), a 1x1 shortcut conv (reading the pre-activated input) where channels or stride change, identity otherwise; in the last stage one block module instance is applied twice in a row (the same parameters and the same BN buffers run twice, so its activations are saved twice for backward), then BN, ReLU, global average pool, a linear classifier; the cross-entropy is in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class PreActBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu2 = nn.ReLU(inplace=True)
        self.drop = nn.Dropout(p=0.0)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False) if (cin != cout or stride != 1) else None
    def forward(self, x):
        o = self.relu1(self.bn1(x))
        sc = self.shortcut(o) if self.shortcut is not None else x
        o = self.conv1(o)
        o = self.conv2(self.drop(self.relu2(self.bn2(o))))
        return o + sc
class WRN(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.stage1 = nn.Sequential(PreActBlock(16, 16, 1), PreActBlock(16, 16, 1))
        self.stage2 = nn.Sequential(PreActBlock(16, 32, 2), PreActBlock(32, 32, 1))
        self.stage3_in = PreActBlock(32, 64, 2)
        self.stage3_rep = PreActBlock(64, 64, 1)
        self.bn = nn.BatchNorm2d(64)
        self.fc = nn.Linear(64, num_classes)
    def forward(self, x):
        x = self.stage2(self.stage1(self.stem(x)))
        x = self.stage3_in(x)
        x = self.stage3_rep(x)
        x = self.stage3_rep(x)
        x = F.relu(self.bn(x))
        return self.fc(x.mean((2, 3)))
def build_model():
    return WRN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
