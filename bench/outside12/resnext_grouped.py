"""A hand-written ResNeXt (RegNet-like widths) on 32 x 32 images: a 3x3 stem conv to 32 channels + BatchNorm2d + nn.ReLU(inplace=True), then four bottleneck blocks (widths 32 -> 64 -> 64 -> 128, strides 1, 2, 1, 2), each a 1x1 conv to the bottleneck width + BatchNorm + in-place ReLU, a grouped 3x3 conv (groups = width / 8, i.e. cardinality with 8 channels per group, carrying the stride) + BatchNorm + in-place ReLU, a 1x1 conv out + BatchNorm, the shortcut (identity, or a strided 1x1 conv + BatchNorm where the shape changes) added in place with out += shortcut and a final in-place ReLU (torch.relu_); global average pool and a linear classifier to 10 classes; the cross-entropy is in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Block(nn.Module):
    def __init__(self, cin, cout, stride, group_width=8):
        super().__init__()
        w = cout // 2
        self.conv1, self.bn1 = nn.Conv2d(cin, w, 1, bias=False), nn.BatchNorm2d(w)
        self.conv2, self.bn2 = nn.Conv2d(w, w, 3, stride, 1, groups=w // group_width, bias=False), nn.BatchNorm2d(w)
        self.conv3, self.bn3 = nn.Conv2d(w, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.short = None if stride == 1 and cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += x if self.short is None else self.short(x)
        return torch.relu_(out)
class ResNeXt(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(Block(32, 32, 1), Block(32, 64, 2), Block(64, 64, 1), Block(64, 128, 2))
        self.fc = nn.Linear(128, 10)
    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))
def build_model():
    return ResNeXt()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
