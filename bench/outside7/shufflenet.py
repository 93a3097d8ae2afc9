"""A small ShuffleNetV2: stride-1 units split the channels with x.chunk(2, dim=1), pass one half through a 1x1 -> depthwise 3x3 -> 1x1 branch and concatenate it back to the untouched half; stride-2 units run both branches (each with its own depthwise stride-2 conv) on the whole input; every unit ends with a channel shuffle (view -> transpose -> contiguous -> view); BatchNorm2d and nn.ReLU(inplace=True), 4 units over 32x32 images, 10 classes."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
def channel_shuffle(x, groups=2):
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous().view(b, c, h, w)
class ShuffleUnit(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.stride = stride
        half = c_out // 2
        if stride == 2:
            self.branch1 = nn.Sequential(nn.Conv2d(c_in, c_in, 3, 2, 1, groups=c_in, bias=False), nn.BatchNorm2d(c_in),
                                         nn.Conv2d(c_in, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(inplace=True))
            b2_in = c_in
        else:
            self.branch1 = None
            b2_in = c_in // 2
        self.branch2 = nn.Sequential(nn.Conv2d(b2_in, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(inplace=True),
                                     nn.Conv2d(half, half, 3, stride, 1, groups=half, bias=False), nn.BatchNorm2d(half),
                                     nn.Conv2d(half, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(inplace=True))
    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), 1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), 1)
        return channel_shuffle(out, 2)
class ShuffleNet(nn.Module):
    def __init__(self, n_cls=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 3, 1, 1, bias=False), nn.BatchNorm2d(24), nn.ReLU(inplace=True))
        self.units = nn.Sequential(ShuffleUnit(24, 48, 2), ShuffleUnit(48, 48, 1), ShuffleUnit(48, 96, 2), ShuffleUnit(96, 96, 1))
        self.fc = nn.Linear(96, n_cls)
    def forward(self, img, label):
        x = self.units(self.stem(img))
        return F.cross_entropy(self.fc(x.mean((2, 3))), label)
def build_model():
    return ShuffleNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"img": torch.randn(b, 3, 32, 32, generator=g), "label": torch.randint(0, 10, (b,), generator=g)}
