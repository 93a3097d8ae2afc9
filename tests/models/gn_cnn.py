"""A small CNN of conv-GroupNorm-ReLU blocks (stem, two middle blocks, top, a linear head). Cut before
its second middle block, that block's input is received by the later stage, and its checkpoint alone
holds it under ``selective`` (tests/test_selective_first.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH_SIZE = 8


def block(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.GroupNorm(4, cout), nn.ReLU())


class GNCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = block(3, 16, 1)
        self.mid = nn.Sequential(block(16, 32, 2), block(32, 32, 1))
        self.top = block(32, 64, 2)
        self.head = nn.Linear(64, 10)

    def forward(self, img, labels):
        h = self.top(self.mid(self.stem(img)))
        return F.cross_entropy(self.head(h.mean((2, 3))), labels)


def build_model():
    return GNCNN()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"img": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
