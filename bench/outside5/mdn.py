"""A mixture density network: an MLP predicts mixture logits, means and log-scales of 5 diagonal Gaussians; the loss is the negative log-likelihood by torch.distributions (Normal(...).log_prob summed over dimensions, log_softmax weights, logsumexp over components)."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.distributions import Normal
BATCH_SIZE = 8
K, DX, DY = 5, 12, 3
class MDN(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(DX, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.pi = nn.Linear(hidden, K)
        self.mu = nn.Linear(hidden, K * DY)
        self.log_sigma = nn.Linear(hidden, K * DY)
    def forward(self, x, y):
        h = self.body(x)
        log_w = F.log_softmax(self.pi(h), -1)
        mu = self.mu(h).view(-1, K, DY)
        sigma = self.log_sigma(h).view(-1, K, DY).clamp(-5, 5).exp()
        lp = Normal(mu, sigma).log_prob(y.unsqueeze(1)).sum(-1)
        return -torch.logsumexp(log_w + lp, -1).mean()
def build_model():
    return MDN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, DX, generator=g)
    return {"x": x, "y": torch.sin(x[:, :DY] * 2) + 0.1 * torch.randn(b, DY, generator=g)}
