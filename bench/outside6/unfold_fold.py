"""A patch-based image denoiser: nn.Unfold cuts overlapping 4x4 patches (stride 2), an MLP denoises each patch as a token, F.fold sums the overlapping patches back and a normaliser buffer (fold of unfolded ones, built in __init__) averages them; MSE against the clean image."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class PatchDenoiser(nn.Module):
    def __init__(self, size=32, k=4, s=2, p=1, d=128):
        super().__init__()
        self.size, self.k, self.s, self.p = size, k, s, p
        self.unfold = nn.Unfold(kernel_size=k, stride=s, padding=p)
        dim = 3 * k * k
        self.mlp = nn.Sequential(nn.Linear(dim, d), nn.GELU(), nn.Linear(d, d), nn.GELU(), nn.Linear(d, dim))
        ones = torch.ones(1, 3, size, size)
        self.register_buffer("norm", F.fold(self.unfold(ones), size, k, stride=s, padding=p))
    def forward(self, noisy, clean):
        patches = self.unfold(noisy).transpose(1, 2)  # b, L, 3*k*k
        out = patches - self.mlp(patches)  # predict the noise per patch
        img = F.fold(out.transpose(1, 2), self.size, self.k, stride=self.s, padding=self.p) / self.norm
        return F.mse_loss(img, clean)
def build_model():
    return PatchDenoiser()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    clean = torch.rand(b, 3, 32, 32, generator=g)
    return {"noisy": clean + 0.1 * torch.randn(b, 3, 32, 32, generator=g), "clean": clean}
