"""A capsule network: primary capsules from a conv, squash, per-pair transformation matrices (einsum), three iterations of dynamic routing (softmax over coupling logits updated by agreement), margin loss on capsule lengths."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
def squash(s, dim=-1):
    n2 = (s * s).sum(dim, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)
class CapsNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 5, 2)
        self.prim = nn.Conv2d(32, 8 * 8, 5, 2)
        self.W = nn.Parameter(0.01 * torch.randn(8 * 16, classes, 16, 8))
        self.classes = classes
    def forward(self, x, y):
        u = squash(self.prim(F.relu(self.conv(x))).view(x.shape[0], 8, 8, -1).permute(0, 3, 2, 1).reshape(x.shape[0], -1, 8))
        uhat = torch.einsum("icdk,bik->bicd", self.W, u)
        logits = torch.zeros(uhat.shape[:3])
        for it in range(3):
            c = logits.softmax(2)
            v = squash((c.unsqueeze(-1) * uhat).sum(1))
            if it < 2:
                logits = logits + (uhat * v.unsqueeze(1)).sum(-1)
        lens = v.norm(dim=-1)
        t = F.one_hot(y, self.classes).float()
        return (t * F.relu(0.9 - lens) ** 2 + 0.5 * (1 - t) * F.relu(lens - 0.1) ** 2).sum(1).mean()
def build_model():
    return CapsNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 1, 28, 28, generator=g), "y": torch.randint(0, 5, (b,), generator=g)}
