"""Spatial transformer network: a localisation net regresses an affine transform (initialised to identity), affine_grid + grid_sample warp the input, F.interpolate upsamples, then a small classifier with log_softmax + nll_loss."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 8
class STN(nn.Module):
    def __init__(self):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(1, 8, 7), nn.MaxPool2d(2), nn.ReLU(True), nn.Conv2d(8, 10, 5), nn.MaxPool2d(2), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 6))
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
        self.cls = nn.Sequential(nn.Conv2d(1, 10, 5), nn.MaxPool2d(2), nn.ReLU(), nn.Conv2d(10, 20, 5), nn.Dropout2d(0.0),
                                 nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(20 * 4 * 4, 10))
    def forward(self, x):
        theta = self.fc_loc(self.loc(x).flatten(1)).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        x = F.grid_sample(x, grid, align_corners=False)
        x = F.interpolate(x, scale_factor=1.0, mode="bilinear", align_corners=False)
        return F.log_softmax(self.cls(x), dim=1)
def build_model():
    return STN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 1, 28, 28, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.nll_loss(out, y)
