"""A hand-written causal linear-attention language model (Katharopoulos et al.): token embeddings (vocab 128, d 32) plus a learned absolute position table, 3 pre-norm blocks each with a hand-written RMSNorm (x * rsqrt(mean(x^2) + eps) * weight) before attention and MLP; attention with 4 heads of 8 uses the feature maps phi(q) = elu(q) + 1 and phi(k) = elu(k) + 1 and is computed causally with torch.cumsum: the key-value outer products phi(k)_t v_t^T (a b x 4 x 16 x 8 x 8 tensor) and the keys phi(k)_t cumulated over time, each query reading its prefix sums (numerator by einsum over the cumulated outer products, denominator phi(q) . cumsum(phi(k)) + 1e-6); a GELU MLP of width 64, residual adds, a final hand-written RMSNorm and an untied output head; no dropout, no batch norm, no buffers; shifted cross-entropy in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, D, NH, T = 128, 32, 4, 16
class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
class LinAttn(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.out = nn.Linear(D, D)
    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, NH, D // NH).permute(2, 0, 3, 1, 4)
        q, k = F.elu(q) + 1, F.elu(k) + 1
        kv = torch.cumsum(k.unsqueeze(-1) * v.unsqueeze(-2), dim=2)
        ksum = torch.cumsum(k, dim=2)
        num = torch.einsum("bhtd,bhtde->bhte", q, kv)
        den = (q * ksum).sum(-1, keepdim=True) + 1e-6
        return self.out((num / den).transpose(1, 2).reshape(b, t, D))
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
        self.attn = LinAttn()
        self.mlp = nn.Sequential(nn.Linear(D, 64), nn.GELU(), nn.Linear(64, D))
    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))
class LinLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Parameter(0.02 * torch.randn(T, D))
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.norm = RMSNorm(D)
        self.head = nn.Linear(D, V, bias=False)
    def forward(self, ids):
        x = self.emb(ids) + self.pos[: ids.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))
def build_model():
    return LinLM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (b, T + 1), generator=g)
    return ids[:, :-1], ids[:, 1:]
def loss_fn(out, y):
    return F.cross_entropy(out.reshape(-1, V), y.reshape(-1))
