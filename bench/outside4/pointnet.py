"""PointNet classifier: a T-Net predicting a 3x3 and a 64x64 transform applied with bmm (identity added), shared per-point MLPs as Conv1d, a max over points, and the feature-transform orthogonality regulariser."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class TNet(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.mlp = nn.Sequential(nn.Conv1d(k, 32, 1), nn.BatchNorm1d(32), nn.ReLU(), nn.Conv1d(32, 64, 1), nn.ReLU())
        self.fc = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, k * k))
    def forward(self, x):
        t = self.fc(self.mlp(x).max(2).values).view(-1, self.k, self.k)
        return t + torch.eye(self.k)
class PointNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.t3, self.t64 = TNet(3), TNet(64)
        self.mlp1 = nn.Sequential(nn.Conv1d(3, 64, 1), nn.BatchNorm1d(64), nn.ReLU())
        self.mlp2 = nn.Sequential(nn.Conv1d(64, 128, 1), nn.BatchNorm1d(128), nn.ReLU(), nn.Conv1d(128, 256, 1))
        self.head = nn.Sequential(nn.Linear(256, 64), nn.ReLU(), nn.Dropout(0.0), nn.Linear(64, classes))
    def forward(self, pts, y):
        x = torch.bmm(self.t3(pts).transpose(1, 2), pts)
        x = self.mlp1(x)
        t = self.t64(x)
        x = torch.bmm(t.transpose(1, 2), x)
        x = self.mlp2(x).max(2).values
        reg = (t @ t.transpose(1, 2) - torch.eye(64)).norm(dim=(1, 2)).mean()
        return F.cross_entropy(self.head(x), y) + 1e-3 * reg
def build_model():
    return PointNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pts": torch.randn(b, 3, 128, generator=g), "y": torch.randint(0, 5, (b,), generator=g)}
