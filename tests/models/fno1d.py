"""A 1-D Fourier neural operator: spectral convolution with complex-valued parameters (torch.cfloat, an odd element count each) mixing the lowest modes of rfft, irfft back, plus a pointwise conv."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Spectral(nn.Module):
    def __init__(self, c, modes):
        super().__init__()
        self.modes = modes
        self.w = nn.Parameter(torch.randn(c, c, modes, dtype=torch.cfloat) / c)
    def forward(self, x):
        xf = torch.fft.rfft(x)
        out = torch.zeros(x.shape[0], x.shape[1], xf.shape[-1], dtype=torch.cfloat)
        out[:, :, :self.modes] = torch.einsum("bim,iom->bom", xf[:, :, :self.modes], self.w)
        return torch.fft.irfft(out, n=x.shape[-1])
class FNO(nn.Module):
    def __init__(self, c=15, modes=7, layers=3):
        super().__init__()
        self.lift = nn.Conv1d(2, c, 1)
        self.spec = nn.ModuleList(Spectral(c, modes) for _ in range(layers))
        self.pw = nn.ModuleList(nn.Conv1d(c, c, 1) for _ in range(layers))
        self.proj = nn.Conv1d(c, 1, 1)
    def forward(self, a, u):
        h = self.lift(a)
        for s, p in zip(self.spec, self.pw):
            h = F.gelu(s(h) + p(h))
        return F.mse_loss(self.proj(h), u)
def build_model():
    return FNO()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"a": torch.randn(b, 2, 64, generator=g), "u": torch.randn(b, 1, 64, generator=g)}
