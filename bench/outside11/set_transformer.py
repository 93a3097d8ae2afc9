"""A hand-written Set Transformer (Lee et al.) regressing a statistic of a padded point set: points (b, 24, 2) with a boolean padding mask (sets of 10 to 24 points), a linear embedding to d 32, an encoder of two ISAB blocks, each with 8 learned inducing points (an nn.Parameter of shape (1, 8, 32) expanded over the batch in forward with .expand) that first attend to the set (a MAB: nn.MultiheadAttention with key_padding_mask for the padded points, residual, LayerNorm, a 2-layer ReLU feed-forward, residual, LayerNorm) and then the set attends back to the inducing points' output (another MAB, no mask); a PMA decoder pools with 2 learned seed vectors (also expanded over the batch) attending to the encoded set under the padding mask, a SAB (self-attention MAB) over the 2 pooled seeds, the seeds flattened and a linear head to 3 outputs; loss_fn is the MSE to the target (each set's mean x, mean y and max radius over its real points, computed in example_batch)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
D, NH, M, N = 32, 4, 8, 24
class MAB(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, NH, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.ReLU(), nn.Linear(2 * D, D))
    def forward(self, q, kv, key_padding_mask=None):
        h = self.ln1(q + self.attn(q, kv, kv, key_padding_mask=key_padding_mask, need_weights=False)[0])
        return self.ln2(h + self.ff(h))
class ISAB(nn.Module):
    def __init__(self):
        super().__init__()
        self.inducing = nn.Parameter(torch.randn(1, M, D) * 0.1)
        self.mab0, self.mab1 = MAB(), MAB()
    def forward(self, x, pad):
        h = self.mab0(self.inducing.expand(x.shape[0], -1, -1), x, key_padding_mask=pad)
        return self.mab1(x, h)
class SetTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(2, D)
        self.enc = nn.ModuleList([ISAB(), ISAB()])
        self.seeds = nn.Parameter(torch.randn(1, 2, D) * 0.1)
        self.pma = MAB()
        self.sab = MAB()
        self.head = nn.Linear(2 * D, 3)
    def forward(self, points, mask):
        pad = ~mask
        x = self.embed(points)
        for blk in self.enc:
            x = blk(x, pad)
        s = self.pma(self.seeds.expand(x.shape[0], -1, -1), x, key_padding_mask=pad)
        s = self.sab(s, s)
        return self.head(s.flatten(1))
def build_model():
    return SetTransformer()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    pts = torch.randn(b, N, 2, generator=g)
    n = torch.randint(10, N + 1, (b,), generator=g)
    n[0] = N
    mask = torch.arange(N)[None, :] < n[:, None]
    pts[~mask] = 0.0
    m = mask.unsqueeze(-1).float()
    mean = (pts * m).sum(1) / m.sum(1)
    rmax = (pts.norm(dim=-1) * mask).amax(1, keepdim=True)
    return {"points": pts, "mask": mask}, torch.cat([mean, rmax], 1)
def loss_fn(out, y):
    return F.mse_loss(out, y)
