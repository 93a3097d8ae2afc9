"""A 1-D signal model with one encoder and two decoders: the encoder pads with F.pad(mode='reflect') before depthwise Conv1d (groups = channels) + pointwise convs, a ConvTranspose1d decoder reconstructs the signal and a second decoder labels every step; a losses() method returns a dict of three losses (reconstruction, per-step cross-entropy, a smoothness penalty) that forward sums."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class DWBlock(nn.Module):
    def __init__(self, c, k=7, stride=1):
        super().__init__()
        self.pad = k // 2
        self.dw = nn.Conv1d(c, c, k, stride, groups=c)
        self.pw = nn.Conv1d(c, c, 1)
    def forward(self, x):
        return F.gelu(self.pw(self.dw(F.pad(x, (self.pad, self.pad), mode="reflect"))))
class TwoDecoders(nn.Module):
    def __init__(self, c_in=4, c=48, n_cls=6):
        super().__init__()
        self.stem = nn.Conv1d(c_in, c, 1)
        self.encoder = nn.Sequential(DWBlock(c), DWBlock(c, stride=2), DWBlock(c), DWBlock(c, stride=2), DWBlock(c))
        self.recon = nn.Sequential(nn.ConvTranspose1d(c, c, 4, 2, 1), nn.GELU(), nn.ConvTranspose1d(c, c_in, 4, 2, 1))
        self.tagger = nn.Sequential(DWBlock(c), nn.Conv1d(c, n_cls, 1))
    def losses(self, signal, tags):
        z = self.encoder(self.stem(signal))
        rec = self.recon(z)
        logits = F.interpolate(self.tagger(z), size=signal.shape[-1], mode="linear", align_corners=False)
        return {"recon": F.l1_loss(rec, signal), "tags": F.cross_entropy(logits, tags),
                "smooth": 0.1 * (rec[..., 1:] - rec[..., :-1]).pow(2).mean()}
    def forward(self, signal, tags):
        return sum(self.losses(signal, tags).values())
def build_model():
    return TwoDecoders()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"signal": torch.randn(b, 4, 128, generator=g), "tags": torch.randint(0, 6, (b, 128), generator=g)}
