"""A hand-written Hyena language model (order-2 Hyena operator, Poli et al.) over 32 tokens: an embedding of 96 tokens to d 32, two pre-LayerNorm blocks, each a Hyena mixer (a Linear to 3 x d split into v, x1, x2, each passed through a causal depthwise short conv1d of kernel 3 (left padding, the right end sliced off); an implicit long filter made in forward by a small MLP with sine activations (Linear 5 -> 16, sin, Linear 16 -> 16, sin, Linear 16 -> 2 x d) over positional features (normalised time and two sin/cos pairs, kept as a non-persistent buffer), multiplied by an exponential decay window exp(-decay * t) with one decay rate per channel; then v = x1 * v followed by the long causal convolution of v with the first filter done as FFT convolution (torch.fft.rfft of input and filter zero-padded to 2L, product, torch.fft.irfft with n=2L, the first L samples kept, plus a learned per-channel skip v * bias), then v = x2 * v and the second filter likewise; an output Linear; residual) and a GELU MLP (d -> 64 -> d, residual); a final LayerNorm and a linear head; the next-token cross-entropy (targets shifted in example_batch) is computed in forward and returned with the logits as (loss, logits)."""
import math
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, D, L, ORDER = 96, 32, 32, 2
def fftconv(u, k, bias):
    n = 2 * u.shape[-1]
    y = torch.fft.irfft(torch.fft.rfft(u, n=n) * torch.fft.rfft(k, n=n), n=n)[..., : u.shape[-1]]
    return y + u * bias.unsqueeze(-1)
class HyenaFilter(nn.Module):
    def __init__(self):
        super().__init__()
        t = torch.linspace(0, 1, L)
        w = 2 * math.pi * t
        self.register_buffer("z", torch.stack([t, torch.sin(w), torch.cos(w), torch.sin(2 * w), torch.cos(2 * w)], -1), persistent=False)
        self.register_buffer("t", t, persistent=False)
        self.l1, self.l2, self.l3 = nn.Linear(5, 16), nn.Linear(16, 16), nn.Linear(16, ORDER * D)
        self.decay = nn.Parameter(torch.linspace(0.5, 4.0, D))
        self.bias = nn.Parameter(torch.randn(ORDER, D) * 0.1)
    def forward(self):
        h = self.l3(torch.sin(self.l2(torch.sin(self.l1(self.z)))))  # (L, ORDER*D)
        h = h.transpose(0, 1).reshape(ORDER, D, L)
        return h * torch.exp(-self.decay.unsqueeze(-1) * self.t)
class Hyena(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(D, 3 * D)
        self.short = nn.Conv1d(3 * D, 3 * D, 3, groups=3 * D, padding=2)
        self.filt = HyenaFilter()
        self.out_proj = nn.Linear(D, D)
    def forward(self, x):
        u = self.in_proj(x).transpose(1, 2)
        u = self.short(u)[..., : x.shape[1]]
        v, x1, x2 = u.split(D, dim=1)
        k = self.filt()
        for o, gate in enumerate((x1, x2)):
            v = fftconv(gate * v, k[o], self.filt.bias[o])
        return self.out_proj(v.transpose(1, 2))
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.mix = Hyena()
        self.mlp = nn.Sequential(nn.Linear(D, 64), nn.GELU(), nn.Linear(64, D))
    def forward(self, x):
        x = x + self.mix(self.ln1(x))
        return x + self.mlp(self.ln2(x))
class HyenaLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)
    def forward(self, ids, targets):
        x = self.emb(ids)
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)), logits
def build_model():
    return HyenaLM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    seq = torch.randint(0, V, (b, L + 1), generator=g)
    return {"ids": seq[:, :-1], "targets": seq[:, 1:]}
