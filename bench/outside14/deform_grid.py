"""A hand-written CNN with a deformable-convolution-like resampling layer on 24 x 24 images: a 3x3 stem conv to 16 channels + BatchNorm + ReLU and a strided 3x3 conv to 24 channels + BatchNorm + ReLU (12 x 12), then a 3x3 offset conv predicting per-pixel (dx, dy) offsets (tanh, scaled to at most 2 pixels in normalised coordinates) and a modulation mask (sigmoid, DCNv2-style), the offsets added to a fixed identity sampling grid (a buffer from torch.meshgrid, expanded over the batch) and the features resampled with F.grid_sample (bilinear, padding_mode "border", align_corners False), multiplied by the mask and passed through a 3x3 conv + BatchNorm + ReLU added back to the unresampled features; a second deformable resampling of the same kind, global average pooling and a linear classifier to 10 classes; cross-entropy in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Deform(nn.Module):
    def __init__(self, c, size):
        super().__init__()
        self.offset = nn.Conv2d(c, 3, 3, padding=1)
        nn.init.normal_(self.offset.weight, std=0.01)
        self.conv = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
        self.register_buffer("base", torch.stack([xs, ys], -1))   # H, W, 2
        self.scale = 2.0 * 2 / size
    def forward(self, x):
        o = self.offset(x)
        off = torch.tanh(o[:, :2]).permute(0, 2, 3, 1) * self.scale
        mask = torch.sigmoid(o[:, 2:])
        grid = self.base.unsqueeze(0).expand(x.shape[0], -1, -1, -1) + off
        y = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
        return x + self.conv(y * mask)
class DeformNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.Conv2d(16, 24, 3, 2, 1, bias=False), nn.BatchNorm2d(24), nn.ReLU())
        self.d1, self.d2 = Deform(24, 12), Deform(24, 12)
        self.fc = nn.Linear(24, 10)
    def forward(self, x):
        return self.fc(self.d2(self.d1(self.stem(x))).mean((2, 3)))
def build_model():
    return DeformNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 24, 24, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
