"""A hand-written ViT classifier with stochastic depth on 32 x 32 images: a 4 x 4 patch-embedding conv (64 patches, d 48), flatten(2).transpose(1, 2), a learned class token (an nn.Parameter expanded over the batch and concatenated in front), learned position embeddings over the 65 tokens, 4 pre-LN blocks (hand-written attention: one qkv Linear, reshape/permute into 4 heads, F.scaled_dot_product_attention, an output projection; a GELU MLP of width 96), each residual branch passed through a per-sample drop path whose keep mask is drawn in forward with torch.rand(b, 1, 1) from torch's own generator (floor of keep_prob + rand, the branch divided by keep_prob), the drop rates rising linearly 0 -> 0.2 over the depth (so the first block's rate is 0 and draws nothing), a final LayerNorm, the class token's state through a linear head; loss_fn is the cross-entropy with label smoothing 0.1."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
D, NH, DEPTH, MLP, NCLS = 48, 4, 4, 96, 10
def drop_path(x, p, training):
    if p == 0.0 or not training:
        return x
    keep = 1.0 - p
    mask = torch.floor(keep + torch.rand(x.shape[0], 1, 1, dtype=x.dtype, device=x.device))
    return x.div(keep) * mask
class Block(nn.Module):
    def __init__(self, dp):
        super().__init__()
        self.dp = dp
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, MLP), nn.GELU(), nn.Linear(MLP, D))
    def attn(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).reshape(B, T, 3, NH, D // NH).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v)
        return self.proj(o.transpose(1, 2).reshape(B, T, D))
    def forward(self, x):
        x = x + drop_path(self.attn(self.ln1(x)), self.dp, self.training)
        return x + drop_path(self.mlp(self.ln2(x)), self.dp, self.training)
class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, D, 4, 4)
        self.cls = nn.Parameter(torch.zeros(1, 1, D))
        self.pos = nn.Parameter(torch.randn(1, 65, D) * 0.02)
        self.blocks = nn.ModuleList(Block(0.2 * i / (DEPTH - 1)) for i in range(DEPTH))
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, NCLS)
    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x)[:, 0])
def build_model():
    return ViT()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, NCLS, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y, label_smoothing=0.1)
