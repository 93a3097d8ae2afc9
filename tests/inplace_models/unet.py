"""A small 2-D U-Net with in-place ReLUs (as most CNNs write them): encoder, bottleneck, decoder with
skip connections concatenated; per-pixel classification."""
import torch
from torch import nn

BATCH_SIZE = 4


def block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, c: int = 8, classes: int = 3):
        super().__init__()
        self.enc1, self.enc2, self.enc3 = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.pool = nn.MaxPool2d(2)
        self.mid = block(4 * c, 8 * c)
        self.up3, self.dec3 = nn.ConvTranspose2d(8 * c, 4 * c, 2, stride=2), block(8 * c, 4 * c)
        self.up2, self.dec2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2), block(4 * c, 2 * c)
        self.up1, self.dec1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2), block(2 * c, c)
        self.relu = nn.ReLU(inplace=True)
        self.head = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        e3 = self.enc3(self.pool(e2))
        m = self.mid(self.pool(e3))
        d3 = self.dec3(torch.cat([self.relu(self.up3(m)), e3], 1))
        d2 = self.dec2(torch.cat([self.relu(self.up2(d3)), e2], 1))
        d1 = self.dec1(torch.cat([self.relu(self.up1(d2)), e1], 1))
        return self.head(d1)


def build_model():
    return UNet()


def example_batch(batch_size: int):
    return torch.randn(batch_size, 3, 32, 32), torch.randint(0, 3, (batch_size, 32, 32))


def loss_fn(output, target):
    return nn.functional.cross_entropy(output, target)
