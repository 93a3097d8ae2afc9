"""A hand-written convolutional VAE with a Gumbel-softmax vector quantiser (as in DALL-E's dVAE) on 1 x 16 x 16 images, returning its loss from forward: an encoder of two strided 4x4 convs (1 -> 16 -> 32 channels, ReLU) and a 1x1 conv to logits over 32 codes at each of the 4 x 4 positions, F.gumbel_softmax(logits, tau=0.9, hard=True, dim=1) (Gumbel noise drawn in forward, a one-hot argmax with the straight-through soft gradient), the one-hot codes mapped to 16-dimensional embeddings with einsum against a learned codebook, a decoder of a 3x3 conv + ReLU and two 4x4 transposed convs back to 16 x 16 (sigmoid), and the loss the pixel MSE plus 0.01 times the KL divergence of the softmax code distribution from the uniform one (sum of q * log(q * 32), averaged over positions)."""
import math
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
K, CD = 32, 16
class GumbelVQ(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 4, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 4, 2, 1), nn.ReLU(),
                                 nn.Conv2d(32, K, 1))
        self.codebook = nn.Parameter(torch.randn(K, CD))
        self.dec = nn.Sequential(nn.Conv2d(CD, 32, 3, padding=1), nn.ReLU(), nn.ConvTranspose2d(32, 16, 4, 2, 1),
                                 nn.ReLU(), nn.ConvTranspose2d(16, 1, 4, 2, 1))
    def forward(self, x):
        logits = self.enc(x)                                            # b, K, 4, 4
        onehot = F.gumbel_softmax(logits, tau=0.9, hard=True, dim=1)
        z = torch.einsum("bkhw,kd->bdhw", onehot, self.codebook)
        recon = torch.sigmoid(self.dec(z))
        logq = F.log_softmax(logits, 1)
        kl = (logq.exp() * (logq + math.log(K))).sum(1).mean()
        return F.mse_loss(recon, x) + 0.01 * kl
def build_model():
    return GumbelVQ()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.rand(b, 1, 16, 16, generator=g)}
