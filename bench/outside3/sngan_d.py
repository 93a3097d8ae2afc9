"""A GAN discriminator trained on real/fake labels with spectral normalisation (nn.utils.parametrizations.spectral_norm: a power iteration whose vectors are buffers updated in forward), LeakyReLU(inplace=True)."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.nn.utils.parametrizations import spectral_norm
BATCH_SIZE = 8
def build_model():
    return nn.Sequential(spectral_norm(nn.Conv2d(3, 32, 4, 2, 1)), nn.LeakyReLU(0.2, inplace=True),
                         spectral_norm(nn.Conv2d(32, 64, 4, 2, 1)), nn.LeakyReLU(0.2, inplace=True),
                         spectral_norm(nn.Conv2d(64, 128, 4, 2, 1)), nn.LeakyReLU(0.2, inplace=True),
                         nn.Flatten(), spectral_norm(nn.Linear(128 * 4 * 4, 1)))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), (torch.arange(b) % 2).float().unsqueeze(1)
def loss_fn(out, y):
    return F.binary_cross_entropy_with_logits(out, y)
