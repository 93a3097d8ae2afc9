"""A hypernetwork: a small net produces the weights of a target MLP from a learned task embedding; the target runs with F.linear on those generated (activation) weights."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class HyperNet(nn.Module):
    def __init__(self, d_in=16, d_h=32, d_out=4, z=8):
        super().__init__()
        self.shapes = [(d_h, d_in), (d_h,), (d_out, d_h), (d_out,)]
        n = sum(torch.Size(s).numel() for s in self.shapes)
        self.z = nn.Parameter(torch.randn(z))
        self.gen = nn.Sequential(nn.Linear(z, 64), nn.ReLU(), nn.Linear(64, n))
    def forward(self, x, y):
        flat = self.gen(self.z)
        ws, i = [], 0
        for s in self.shapes:
            k = torch.Size(s).numel()
            ws.append(flat[i:i + k].view(s))
            i += k
        h = F.relu(F.linear(x, ws[0], ws[1]))
        return F.cross_entropy(F.linear(h, ws[2], ws[3]), y)
def build_model():
    return HyperNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 16, generator=g), "y": torch.randint(0, 4, (b,), generator=g)}
