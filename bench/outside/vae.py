"""A convolutional VAE: reparameterisation draws noise in forward (randn_like), loss = reconstruction + KL."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class VAE(nn.Module):
    def __init__(self, z=16):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 4, 2, 1), nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(16, 32, 4, 2, 1),
                                 nn.LeakyReLU(0.2, inplace=True), nn.Flatten())
        self.mu = nn.Linear(32 * 7 * 7, z)
        self.logvar = nn.Linear(32 * 7 * 7, z)
        self.dec_in = nn.Linear(z, 32 * 7 * 7)
        self.dec = nn.Sequential(nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.ReLU(inplace=True), nn.ConvTranspose2d(16, 1, 4, 2, 1))
    def forward(self, x):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        rec = self.dec(self.dec_in(z).view(-1, 32, 7, 7))
        bce = F.binary_cross_entropy_with_logits(rec, x, reduction="sum") / x.shape[0]
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / x.shape[0]
        return bce + kl
def build_model():
    return VAE()
def example_batch(b):
    return {"x": torch.rand(b, 1, 28, 28, generator=torch.Generator().manual_seed(0))}
