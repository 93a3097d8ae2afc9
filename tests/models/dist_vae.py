"""A VAE written with torch.distributions: Normal(mu, sigma).rsample(), Bernoulli log_prob, kl_divergence to a standard normal."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.distributions import Normal, Bernoulli, kl_divergence
BATCH_SIZE = 8
class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
        self.dec = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64))
    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, -1)
        q = Normal(mu, (0.5 * logvar).exp())
        z = q.rsample()
        rec = Bernoulli(logits=self.dec(z)).log_prob(x).sum(-1)
        kl = kl_divergence(q, Normal(torch.zeros_like(mu), torch.ones_like(mu))).sum(-1)
        return (kl - rec).mean()
def build_model():
    return VAE()
def example_batch(b):
    return {"x": (torch.rand(b, 64, generator=torch.Generator().manual_seed(0)) > 0.5).float()}
