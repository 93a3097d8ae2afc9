"""A WGAN critic with weight clipping done inside forward (for p in parameters: p.clamp_), InstanceNorm2d(affine), PReLU; loss = mean critic score on fakes minus on reals, inputs given as a pair of image batches."""
import torch, torch.nn as nn
BATCH_SIZE = 8
class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 4, 2, 1), nn.PReLU(16), nn.Conv2d(16, 32, 4, 2, 1), nn.InstanceNorm2d(32, affine=True),
                                 nn.PReLU(32), nn.Conv2d(32, 1, 4, 1, 0))
    def forward(self, real, fake):
        with torch.no_grad():
            for p in self.parameters():
                p.clamp_(-0.05, 0.05)
        return self.net(fake).mean() - self.net(real).mean()
def build_model():
    return Critic()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(b, 3, 16, 16, generator=g), torch.rand(b, 3, 16, 16, generator=g)), torch.zeros(b)
def loss_fn(out, _):
    return out
