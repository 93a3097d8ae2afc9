"""A small Res2Net CNN with CBAM attention: each block splits its channels into 4 groups and feeds every 3x3 conv the previous group's output plus its own split (cumulative adds), then CBAM reweights channels (avg- and max-pooled descriptors through a shared 1x1-conv MLP) and positions (a 7x7 conv over the channel mean and max); written the way CNN code is, with F.relu(inplace=True), nn.ReLU(inplace=True) and an in-place `out += identity`; BatchNorm2d, 3 blocks, 10 classes."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class CBAM(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.mlp = nn.Sequential(nn.Conv2d(c, c // r, 1, bias=False), nn.ReLU(inplace=True), nn.Conv2d(c // r, c, 1, bias=False))
        self.spatial = nn.Conv2d(2, 1, 7, padding=3, bias=False)
    def forward(self, x):
        ca = torch.sigmoid(self.mlp(F.adaptive_avg_pool2d(x, 1)) + self.mlp(F.adaptive_max_pool2d(x, 1)))
        x = x * ca
        sa = torch.sigmoid(self.spatial(torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)))
        return x * sa
class Res2Block(nn.Module):
    def __init__(self, c, scale=4):
        super().__init__()
        self.scale, self.width = scale, c // scale
        self.conv1 = nn.Conv2d(c, c, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.convs = nn.ModuleList([nn.Conv2d(self.width, self.width, 3, padding=1, bias=False) for _ in range(scale - 1)])
        self.bns = nn.ModuleList([nn.BatchNorm2d(self.width) for _ in range(scale - 1)])
        self.conv3 = nn.Conv2d(c, c, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c)
        self.cbam = CBAM(c)
        self.relu = nn.ReLU(inplace=True)
    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        spx = torch.split(out, self.width, 1)
        for i in range(self.scale - 1):
            sp = spx[i] if i == 0 else sp + spx[i]
            sp = F.relu(self.bns[i](self.convs[i](sp)), inplace=True)
            out = sp if i == 0 else torch.cat((out, sp), 1)
        out = torch.cat((out, spx[-1]), 1)
        out = self.cbam(self.bn3(self.conv3(out)))
        out += identity
        return self.relu(out)
class Res2NetCBAM(nn.Module):
    def __init__(self, c=32, n_cls=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(*[Res2Block(c) for _ in range(3)])
        self.fc = nn.Linear(c, n_cls)
    def forward(self, img, label):
        x = self.blocks(self.stem(img))
        return F.cross_entropy(self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)), label)
def build_model():
    return Res2NetCBAM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"img": torch.randn(b, 3, 32, 32, generator=g), "label": torch.randint(0, 10, (b,), generator=g)}
