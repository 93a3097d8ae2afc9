"""A hand-written EfficientNet-B0-like CNN on 32 x 32 images: a strided 3x3 stem conv + BatchNorm + nn.SiLU(inplace=True), then six MBConv blocks (expand 1x1 conv x4 + BN + in-place SiLU, depthwise 3x3 or 5x5 conv + BN + in-place SiLU, squeeze-and-excitation (global pool, 1x1 reduce + SiLU, 1x1 expand + sigmoid, multiplied into the features), project 1x1 conv + BN), the residual blocks with stochastic depth (drop-connect: the branch multiplied by a per-sample Bernoulli mask / keep probability in training) added to the input; a 1x1 head conv to 128 + BN + in-place SiLU, global average pool, dropout 0.2 and a linear classifier to 10 classes; label-smoothed cross-entropy in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class MBConv(nn.Module):
    def __init__(self, cin, cout, k, stride, expand=4, drop=0.1):
        super().__init__()
        w = cin * expand
        self.expand = nn.Sequential(nn.Conv2d(cin, w, 1, bias=False), nn.BatchNorm2d(w), nn.SiLU(inplace=True))
        self.dw = nn.Sequential(nn.Conv2d(w, w, k, stride, k // 2, groups=w, bias=False), nn.BatchNorm2d(w), nn.SiLU(inplace=True))
        r = max(4, cin // 4)
        self.se_reduce, self.se_expand = nn.Conv2d(w, r, 1), nn.Conv2d(r, w, 1)
        self.project = nn.Sequential(nn.Conv2d(w, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout
        self.drop = drop
    def forward(self, x):
        h = self.dw(self.expand(x))
        s = torch.sigmoid(self.se_expand(F.silu(self.se_reduce(h.mean((2, 3), keepdim=True)))))
        h = self.project(h * s)
        if not self.residual:
            return h
        if self.training and self.drop > 0:
            keep = 1 - self.drop
            mask = torch.empty(h.shape[0], 1, 1, 1, dtype=h.dtype, device=h.device).bernoulli_(keep)
            h = h * mask / keep
        return h + x
class EffNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU(inplace=True))
        self.blocks = nn.Sequential(MBConv(16, 16, 3, 1), MBConv(16, 24, 3, 2), MBConv(24, 24, 3, 1),
                                    MBConv(24, 40, 5, 2), MBConv(40, 40, 5, 1), MBConv(40, 64, 3, 1))
        self.head = nn.Sequential(nn.Conv2d(64, 128, 1, bias=False), nn.BatchNorm2d(128), nn.SiLU(inplace=True))
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(128, 10)
    def forward(self, x):
        return self.fc(self.drop(self.head(self.blocks(self.stem(x))).mean((2, 3))))
def build_model():
    return EffNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y, label_smoothing=0.1)
