"""(bench/outside5/feature_hooks.py) A CNN autoencoder trained with a feature-matching (perceptual-style) loss: forward hooks registered in __init__ store a frozen random encoder's intermediate activations in a dict on the module, read back after the calls; a forward pre-hook rescales the input."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class HookedAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.ae = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, 1, 1), nn.ReLU(),
                                nn.ConvTranspose2d(32, 3, 4, 2, 1))
        self.critic = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, 2, 1))
        for p in self.critic.parameters():
            p.requires_grad_(False)
        self.feats = {}
        for i in (1, 3, 4):
            self.critic[i].register_forward_hook(self._keep(i))
        self.ae.register_forward_pre_hook(lambda mod, args: (args[0] * 2 - 1,))
    def _keep(self, i):
        def hook(mod, inp, out):
            self.feats.setdefault(i, []).append(out)
        return hook
    def forward(self, img):
        rec = self.ae(img)
        self.feats.clear()
        self.critic(rec)
        self.critic(img * 2 - 1)
        loss = F.l1_loss(rec, img * 2 - 1)
        for fake, real in self.feats.values():
            loss = loss + F.mse_loss(fake, real.detach())
        self.feats.clear()
        return loss
def build_model():
    return HookedAE()
def example_batch(b):
    return {"img": torch.rand(b, 3, 32, 32, generator=torch.Generator().manual_seed(0))}
