"""Quantisation-aware training: a small CNN prepared with torch.ao.quantization's prepare_qat (fake-quantise modules whose observers update their min/max buffers in forward)."""
import torch, torch.nn as nn, torch.nn.functional as F
import torch.ao.quantization as tq
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.c1, self.r1 = nn.Conv2d(3, 16, 3, padding=1), nn.ReLU()
        self.c2, self.r2 = nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()
        self.fc = nn.Linear(16 * 16 * 16, 10)
    def forward(self, x):
        x = self.quant(x)
        x = self.r2(self.c2(self.r1(self.c1(x))))
        return self.dequant(self.fc(x.flatten(1)))
def build_model():
    m = Net().train()
    m.qconfig = tq.get_default_qat_qconfig("fbgemm")
    return tq.prepare_qat(m)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 16, 16, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
