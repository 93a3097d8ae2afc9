"""PixelCNN as most tutorials write it: a masked convolution that multiplies its weight by a mask buffer through .data in forward, gated residual layers, a 256-way softmax per pixel."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class MaskedConv2d(nn.Conv2d):
    def __init__(self, kind, *args, **kw):
        super().__init__(*args, **kw)
        self.register_buffer("mask", torch.ones_like(self.weight))
        _, _, h, w = self.weight.shape
        self.mask[:, :, h // 2, w // 2 + (kind == "B"):] = 0
        self.mask[:, :, h // 2 + 1:] = 0
    def forward(self, x):
        self.weight.data *= self.mask
        return super().forward(x)
class PixelCNN(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.first = MaskedConv2d("A", 1, ch, 7, padding=3)
        self.layers = nn.ModuleList(MaskedConv2d("B", ch, ch, 3, padding=1) for _ in range(4))
        self.out = nn.Conv2d(ch, 256, 1)
    def forward(self, x, target):
        h = F.relu(self.first(x))
        for l in self.layers:
            h = h + F.relu(l(h))
        return F.cross_entropy(self.out(h), target)
def build_model():
    return PixelCNN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    t = torch.randint(0, 256, (b, 12, 12), generator=g)
    return {"x": (t.float() / 255).unsqueeze(1), "target": t}
