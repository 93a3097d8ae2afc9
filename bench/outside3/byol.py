"""BYOL-like: an online encoder + predictor and a momentum (EMA) target encoder whose parameters are updated in place inside forward (no_grad lerp_), used under no_grad; symmetric cosine loss."""
import copy, torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class BYOL(nn.Module):
    def __init__(self):
        super().__init__()
        self.online = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.GroupNorm(4, 16), nn.ReLU(inplace=True), nn.Conv2d(16, 32, 3, 2, 1),
                                    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 32))
        self.predictor = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
        self.target = copy.deepcopy(self.online)
        for p in self.target.parameters():
            p.requires_grad_(False)
    def forward(self, a, b):
        with torch.no_grad():
            for pt, po in zip(self.target.parameters(), self.online.parameters()):
                pt.lerp_(po.detach(), 0.01)
            ta, tb = self.target(a), self.target(b)
        pa, pb = self.predictor(self.online(a)), self.predictor(self.online(b))
        return (2 - F.cosine_similarity(pa, tb).mean() - F.cosine_similarity(pb, ta).mean())
def build_model():
    return BYOL()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, 3, 32, 32, generator=g)
    return {"a": x, "b": x.flip(-1) + 0.05 * torch.randn(x.shape, generator=g)}
