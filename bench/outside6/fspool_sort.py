"""A set classifier with featurewise sort pooling (FSPool-like): per-element features plus their running maximum over the element order (torch.cummax), each feature sorted over the set with torch.sort (gradients through the sort's permutation) and pooled with a learned weight per rank and feature."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class FSPoolNet(nn.Module):
    def __init__(self, d_in=6, d=64, n=24, n_cls=5):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(d_in, d), nn.ReLU(), nn.Linear(d, d))
        self.mix = nn.Linear(2 * d, d)
        self.rank_weight = nn.Parameter(torch.randn(n, d) / n)
        self.rho = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, n_cls))
    def forward(self, points, labels):
        h = self.phi(points)  # b, n, d
        running, _ = torch.cummax(h, dim=1)
        h = self.mix(torch.cat([h, running], -1))
        sorted_h, _ = torch.sort(h, dim=1, descending=True)
        pooled = (sorted_h * self.rank_weight).sum(1)
        return F.cross_entropy(self.rho(pooled), labels)
def build_model():
    return FSPoolNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"points": torch.randn(b, 24, 6, generator=g), "labels": torch.randint(0, 5, (b,), generator=g)}
