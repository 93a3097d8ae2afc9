"""A 3-D U-Net for volumetric segmentation: Conv3d + GroupNorm + SiLU double convs over 16^3 volumes, MaxPool3d down three levels, F.interpolate(mode='trilinear') up with torch.cat skip concatenations at every level, per-voxel cross-entropy over three classes."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
def double(cin, cout):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, 1, 1), nn.GroupNorm(4, cout), nn.SiLU(),
                         nn.Conv3d(cout, cout, 3, 1, 1), nn.GroupNorm(4, cout), nn.SiLU())
class UNet3D(nn.Module):
    def __init__(self, c=(8, 16, 24, 32), n_cls=3):
        super().__init__()
        self.downs = nn.ModuleList([double(1, c[0]), double(c[0], c[1]), double(c[1], c[2])])
        self.bottom = double(c[2], c[3])
        self.ups = nn.ModuleList([double(c[3] + c[2], c[2]), double(c[2] + c[1], c[1]), double(c[1] + c[0], c[0])])
        self.out = nn.Conv3d(c[0], n_cls, 1)
    def forward(self, vol, seg):
        skips, h = [], vol
        for down in self.downs:
            h = down(h)
            skips.append(h)
            h = F.max_pool3d(h, 2)
        h = self.bottom(h)
        for up, skip in zip(self.ups, reversed(skips)):
            h = F.interpolate(h, size=skip.shape[2:], mode="trilinear", align_corners=False)
            h = up(torch.cat([h, skip], 1))
        return F.cross_entropy(self.out(h), seg)
def build_model():
    return UNet3D()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"vol": torch.randn(b, 1, 16, 16, 16, generator=g), "seg": torch.randint(0, 3, (b, 16, 16, 16), generator=g)}
