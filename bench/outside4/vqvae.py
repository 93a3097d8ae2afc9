"""VQ-VAE: conv encoder, a codebook looked up by nearest code (argmin over distances), the straight-through estimator (z + (q - z).detach()), commitment loss, and EMA codebook statistics updated in place in forward under no_grad."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class VQ(nn.Module):
    def __init__(self, k=32, d=16, decay=0.99):
        super().__init__()
        self.decay = decay
        self.register_buffer("codebook", torch.randn(k, d))
        self.register_buffer("cluster_size", torch.ones(k))
        self.register_buffer("embed_sum", self.codebook.clone())
    def forward(self, z):
        b, d, h, w = z.shape
        flat = z.permute(0, 2, 3, 1).reshape(-1, d)
        dist = flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.codebook.t() + self.codebook.pow(2).sum(1)
        idx = dist.argmin(1)
        q = F.embedding(idx, self.codebook).view(b, h, w, d).permute(0, 3, 1, 2)
        if self.training:
            with torch.no_grad():
                onehot = F.one_hot(idx, self.codebook.shape[0]).type(flat.dtype)
                self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                self.embed_sum.mul_(self.decay).add_(onehot.t() @ flat, alpha=1 - self.decay)
                self.codebook.copy_(self.embed_sum / (self.cluster_size.unsqueeze(1) + 1e-5))
        commit = F.mse_loss(z, q.detach())
        return z + (q - z).detach(), commit
class VQVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, 16, 4, 2, 1))
        self.vq = VQ()
        self.dec = nn.Sequential(nn.ConvTranspose2d(16, 32, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(32, 3, 4, 2, 1))
    def forward(self, x):
        q, commit = self.vq(self.enc(x))
        return F.mse_loss(self.dec(q), x) + 0.25 * commit
def build_model():
    return VQVAE()
def example_batch(b):
    return {"x": torch.randn(b, 3, 32, 32, generator=torch.Generator().manual_seed(0))}
