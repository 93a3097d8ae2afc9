"""A GAN discriminator with spectral normalisation on every layer
(``torch.nn.utils.parametrizations.spectral_norm``: each forward runs a power-iteration step that updates
its ``u``/``v`` buffers in place and builds the weight from them), LeakyReLU(inplace=True), trained on
real/fake labels with BCE-with-logits."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

BATCH_SIZE = 8


def build_model():
    return nn.Sequential(spectral_norm(nn.Conv2d(3, 16, 4, 2, 1)), nn.LeakyReLU(0.2, inplace=True),
                         spectral_norm(nn.Conv2d(16, 32, 4, 2, 1)), nn.LeakyReLU(0.2, inplace=True),
                         nn.Flatten(), spectral_norm(nn.Linear(32 * 4 * 4, 1)))


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 16, 16, generator=g), (torch.arange(b) % 2).float().unsqueeze(1)


def loss_fn(out, y):
    return F.binary_cross_entropy_with_logits(out, y)
