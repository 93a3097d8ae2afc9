"""A DCGAN trained on its generator loss as one model: a ConvTranspose2d generator with BatchNorm from a noise input, a strided-conv discriminator with LeakyReLU(inplace) and BatchNorm, non-saturating BCE-with-logits loss."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class GAN(nn.Module):
    def __init__(self, z=16, ch=16):
        super().__init__()
        self.G = nn.Sequential(nn.ConvTranspose2d(z, ch * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ch * 4), nn.ReLU(True),
                               nn.ConvTranspose2d(ch * 4, ch * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch * 2), nn.ReLU(True),
                               nn.ConvTranspose2d(ch * 2, 3, 4, 2, 1, bias=False), nn.Tanh())
        self.D = nn.Sequential(nn.Conv2d(3, ch, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                               nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch * 2), nn.LeakyReLU(0.2, inplace=True),
                               nn.Conv2d(ch * 2, 1, 4, 1, 0, bias=False))
    def forward(self, noise, real):
        fake = self.G(noise)
        d_fake, d_real = self.D(fake).flatten(), self.D(real).flatten()
        return (F.binary_cross_entropy_with_logits(d_fake, torch.ones_like(d_fake))
                + F.binary_cross_entropy_with_logits(d_real, torch.zeros_like(d_real)))
def build_model():
    return GAN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"noise": torch.randn(b, 16, 1, 1, generator=g), "real": torch.randn(b, 3, 16, 16, generator=g)}
