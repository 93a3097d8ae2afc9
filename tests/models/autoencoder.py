"""A convolutional autoencoder whose image is its own target: the first convolution saves it (held to its
backward on the first stage) and the loss saves it as its target (on the last stage, held to the loss's
backward): one batch input that two pipeline stages read, each from its own copy."""
import torch, torch.nn as nn, torch.nn.functional as F

BATCH_SIZE = 4


class AutoEncoder(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, c, 4, 2, 1), nn.ReLU(), nn.Conv2d(c, c, 4, 2, 1))
        self.dec = nn.Sequential(nn.ConvTranspose2d(c, c, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(c, 3, 4, 2, 1))

    def forward(self, x):
        return F.mse_loss(self.dec(self.enc(x)), x)


def build_model():
    torch.manual_seed(0)
    return AutoEncoder()


def example_batch(b):
    return {"x": torch.randn(b, 3, 32, 32, generator=torch.Generator().manual_seed(0))}
