"""A FiLM-conditioned CNN classifier: a (b, 16) condition vector goes through an MLP whose single output holds every block's gamma and beta; each of the 4 conv blocks slices its share of that one tensor, splits it with .chunk(2, -1) and computes F.relu(gamma[:, :, None, None] * conv(x) + beta[:, :, None, None]), so one activation is read by all four blocks; cross-entropy over 10 classes."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class FiLMBlock(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, stride, 1)
    def forward(self, x, gamma, beta):
        return F.relu(gamma[:, :, None, None] * self.conv(x) + beta[:, :, None, None])
class FiLMNet(nn.Module):
    def __init__(self, cond_dim=16, chans=(16, 32, 32, 64), n_cls=10):
        super().__init__()
        self.chans = chans
        self.cond = nn.Sequential(nn.Linear(cond_dim, 64), nn.ReLU(), nn.Linear(64, 2 * sum(chans)))
        c_in, blocks = 3, []
        for i, c in enumerate(chans):
            blocks.append(FiLMBlock(c_in, c, 2 if i % 2 else 1))
            c_in = c
        self.blocks = nn.ModuleList(blocks)
        self.fc = nn.Linear(chans[-1], n_cls)
    def forward(self, img, cond, label):
        film = self.cond(cond)
        x, off = img, 0
        for blk, c in zip(self.blocks, self.chans):
            gamma, beta = film[:, off:off + 2 * c].chunk(2, -1)
            x = blk(x, gamma, beta)
            off += 2 * c
        return F.cross_entropy(self.fc(x.mean((2, 3))), label)
def build_model():
    return FiLMNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"img": torch.randn(b, 3, 32, 32, generator=g), "cond": torch.randn(b, 16, generator=g),
            "label": torch.randint(0, 10, (b,), generator=g)}
