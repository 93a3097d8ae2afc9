"""A Conformer speech encoder (2 blocks) tagging every frame: a Conv2d stem subsamples (b, 64 frames, 40 dims) features by 4 in time, then each block is a macaron sandwich (half-step feed-forward, nn.MultiheadAttention, a convolution module: pointwise Conv1d -> GLU -> depthwise Conv1d -> BatchNorm1d -> SiLU(inplace=True) -> pointwise, a second half-step feed-forward, LayerNorm); per-frame cross-entropy over 10 classes."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class FeedForward(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))
    def forward(self, x):
        return self.net(x)
class ConvModule(nn.Module):
    def __init__(self, d, k=15):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, k, padding=k // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.act = nn.SiLU(inplace=True)
        self.pw2 = nn.Conv1d(d, d, 1)
    def forward(self, x):
        y = self.norm(x).transpose(1, 2)
        y = F.glu(self.pw1(y), dim=1)
        y = self.act(self.bn(self.dw(y)))
        return self.pw2(y).transpose(1, 2)
class ConformerBlock(nn.Module):
    def __init__(self, d, heads=4):
        super().__init__()
        self.ff1, self.ff2 = FeedForward(d), FeedForward(d)
        self.attn_norm = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.conv = ConvModule(d)
        self.out_norm = nn.LayerNorm(d)
    def forward(self, x):
        x = x + 0.5 * self.ff1(x)
        h = self.attn_norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.conv(x)
        x = x + 0.5 * self.ff2(x)
        return self.out_norm(x)
class Conformer(nn.Module):
    def __init__(self, n_mels=40, c=16, d=64, n_cls=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, c, 3, 2, 1), nn.ReLU(), nn.Conv2d(c, c, 3, 2, 1), nn.ReLU())
        self.proj = nn.Linear(c * (n_mels // 4), d)
        self.blocks = nn.ModuleList([ConformerBlock(d) for _ in range(2)])
        self.head = nn.Linear(d, n_cls)
    def forward(self, feats, labels):
        x = self.stem(feats.unsqueeze(1))  # b, c, t/4, f/4
        b, c, t, f = x.shape
        x = self.proj(x.permute(0, 2, 1, 3).reshape(b, t, c * f))
        for blk in self.blocks:
            x = blk(x)
        return F.cross_entropy(self.head(x).reshape(-1, self.head.out_features), labels.reshape(-1))
def build_model():
    return Conformer()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"feats": torch.randn(b, 64, 40, generator=g), "labels": torch.randint(0, 10, (b, 16), generator=g)}
