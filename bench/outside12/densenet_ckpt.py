"""A hand-written DenseNet-BC (torchvision's densenet121 layout, built tiny) in its memory-efficient form on 32 x 32 images: a 3x3 stem conv to 24 channels, then three dense blocks of 4 dense layers each with growth rate 12, joined by transitions (BatchNorm2d, ReLU, a 1x1 conv halving the channels, 2x2 average pool). Each dense layer receives the list of all previous feature maps and, as torchvision's memory_efficient=True does, runs its bottleneck (torch.cat of the list along channels, BatchNorm2d, ReLU, a 1x1 conv to 4 x growth) under torch.utils.checkpoint.checkpoint(..., use_reentrant=False) called inside the layer's own forward, so the concatenation and the bottleneck's activations are recomputed in backward; then BatchNorm2d, ReLU and a 3x3 conv to growth channels outside the checkpoint; its output is appended to the list. A final BatchNorm2d + ReLU, global average pool and a linear classifier to 10 classes; the cross-entropy is in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
BATCH_SIZE = 4
GROWTH, BN_SIZE, LAYERS = 12, 4, (4, 4, 4)
class DenseLayer(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, BN_SIZE * GROWTH, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(BN_SIZE * GROWTH)
        self.conv2 = nn.Conv2d(BN_SIZE * GROWTH, GROWTH, 3, 1, 1, bias=False)
    def bottleneck(self, *feats):
        return self.conv1(F.relu(self.norm1(torch.cat(feats, 1))))
    def forward(self, feats):
        if self.training and any(f.requires_grad for f in feats):
            h = checkpoint(self.bottleneck, *feats, use_reentrant=False)
        else:
            h = self.bottleneck(*feats)
        return self.conv2(F.relu(self.norm2(h)))
class DenseBlock(nn.Module):
    def __init__(self, n, cin):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(cin + i * GROWTH) for i in range(n))
    def forward(self, x):
        feats = [x]
        for layer in self.layers:
            feats.append(layer(feats))
        return torch.cat(feats, 1)
class Transition(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.BatchNorm2d(cin), nn.ReLU(inplace=True), nn.Conv2d(cin, cout, 1, bias=False), nn.AvgPool2d(2, 2))
class DenseNet(nn.Module):
    def __init__(self):
        super().__init__()
        c = 2 * GROWTH
        mods = [nn.Conv2d(3, c, 3, 1, 1, bias=False)]
        for i, n in enumerate(LAYERS):
            mods.append(DenseBlock(n, c))
            c += n * GROWTH
            if i < len(LAYERS) - 1:
                mods.append(Transition(c, c // 2))
                c //= 2
        mods += [nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*mods)
        self.classifier = nn.Linear(c, 10)
    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))
def build_model():
    return DenseNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
