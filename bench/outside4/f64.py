"""A double-precision regression MLP (every parameter and input float64), as scientific users train them."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
def build_model():
    return nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)).double()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 16, generator=g, dtype=torch.float64), torch.randn(b, 1, generator=g, dtype=torch.float64)
def loss_fn(out, y):
    return F.mse_loss(out, y)
