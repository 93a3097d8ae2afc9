"""A 2-D U-Net for binary segmentation: GroupNorm + LeakyReLU(inplace=True) double convs, MaxPool down, bilinear F.interpolate up with torch.cat skip concatenations, BCE-with-logits plus a soft Dice loss."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
def double(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.GroupNorm(4, cout), nn.LeakyReLU(0.1, inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.GroupNorm(4, cout), nn.LeakyReLU(0.1, inplace=True))
class UNet(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.d1, self.d2, self.d3 = double(3, c), double(c, 2 * c), double(2 * c, 4 * c)
        self.mid = double(4 * c, 4 * c)
        self.u3, self.u2, self.u1 = double(8 * c, 2 * c), double(4 * c, c), double(2 * c, c)
        self.out = nn.Conv2d(c, 1, 1)
    def up(self, x, skip, block):
        x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)
        return block(torch.cat([x, skip], 1))
    def forward(self, img, mask):
        s1 = self.d1(img)
        s2 = self.d2(F.max_pool2d(s1, 2))
        s3 = self.d3(F.max_pool2d(s2, 2))
        x = self.mid(F.max_pool2d(s3, 2))
        x = self.up(x, s3, self.u3)
        x = self.up(x, s2, self.u2)
        logits = self.out(self.up(x, s1, self.u1))
        p = torch.sigmoid(logits)
        dice = 1 - (2 * (p * mask).sum((1, 2, 3)) + 1) / (p.sum((1, 2, 3)) + mask.sum((1, 2, 3)) + 1)
        return F.binary_cross_entropy_with_logits(logits, mask) + dice.mean()
def build_model():
    return UNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    img = torch.randn(b, 3, 40, 40, generator=g)
    return {"img": img, "mask": (img.mean(1, keepdim=True) > 0).float()}
