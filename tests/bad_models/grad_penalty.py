"""(bench/outside5) A WGAN-GP critic: real and fake samples mixed by batch-provided weights, the critic's gradient with respect to the mix taken inside forward by torch.autograd.grad(create_graph=True) so the backward runs through a backward (a double backward), loss = critic gap + 10 * (||grad|| - 1)^2."""
import torch, torch.nn as nn
BATCH_SIZE = 8
class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 16, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 32, 4, 2, 1), nn.LeakyReLU(0.2),
                                 nn.Flatten(), nn.Linear(32 * 4 * 4, 1))
    def forward(self, real, fake, eps):
        mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
        score = self.net(mix)
        grad, = torch.autograd.grad(score.sum(), mix, create_graph=True)
        penalty = ((grad.flatten(1).norm(dim=1) - 1) ** 2).mean()
        return self.net(fake).mean() - self.net(real).mean() + 10 * penalty
def build_model():
    return Critic()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"real": torch.rand(b, 1, 16, 16, generator=g) * 2 - 1, "fake": torch.randn(b, 1, 16, 16, generator=g).tanh(),
            "eps": torch.rand(b, 1, 1, 1, generator=g)}
