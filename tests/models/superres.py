"""Super-resolution (ESPCN-like): convolutions at low resolution, PixelShuffle to the high one, an L1
loss against a high-resolution target image. ``F.l1_loss`` saves ``out - target``, not the target: the
executor's copy of the target is let go once the loss's forward has read it."""
import torch, torch.nn as nn, torch.nn.functional as F

BATCH_SIZE = 4


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 32, 5, padding=2), nn.Tanh(), nn.Conv2d(32, 16, 3, padding=1), nn.Tanh(),
                         nn.Conv2d(16, 3 * 9, 3, padding=1), nn.PixelShuffle(3), nn.Sigmoid())


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.rand(b, 3, 12, 12, generator=g), torch.rand(b, 3, 36, 36, generator=g)


def loss_fn(out, target):
    return F.l1_loss(out, target)
