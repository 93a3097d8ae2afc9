"""(A copy of bench/outside11/unet1d_audio.py, for tests/test_received_slices.py.) A hand-written 1-D U-Net for waveform denoising (Wave-U-Net style) on a mono 2048-sample signal: an input conv (kernel 15) to 16 channels, then three encoder levels each of Conv1d(kernel 5) -> GroupNorm(4 groups) -> LeakyReLU(0.2) followed by a strided Conv1d (kernel 4, stride 2) that halves the length while the channels grow 16 -> 24 -> 32 -> 48, a bottleneck of two dilated convs (dilation 2 and 4) with GroupNorm and a residual add, then three decoder levels each upsampling with ConvTranspose1d (kernel 4, stride 2, padding 1, exactly doubling the length), concatenating (torch.cat on channels) the matching encoder level's saved activation, and a Conv1d -> GroupNorm -> LeakyReLU; a final 1x1 conv to one channel, tanh, and the noisy input added back (the net predicts a residual); the model takes the noisy waveform (b, 1, 2048) and returns the estimate, and loss_fn is the mean L1 distance to the clean target waveform."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
L = 2048
def cgn(cin, cout, k, dil=1):
    return nn.Sequential(nn.Conv1d(cin, cout, k, padding=dil * (k // 2), dilation=dil), nn.GroupNorm(4, cout), nn.LeakyReLU(0.2))
class Down(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = cgn(cin, cin, 5)
        self.down = nn.Conv1d(cin, cout, 4, stride=2, padding=1)
    def forward(self, x):
        skip = self.conv(x)
        return self.down(skip), skip
class Up(nn.Module):
    def __init__(self, cin, cskip, cout):
        super().__init__()
        self.up = nn.ConvTranspose1d(cin, cskip, 4, stride=2, padding=1)
        self.conv = cgn(2 * cskip, cout, 5)
    def forward(self, x, skip):
        return self.conv(torch.cat([self.up(x), skip], 1))
class WaveUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Conv1d(1, 16, 15, padding=7)
        self.downs = nn.ModuleList([Down(16, 24), Down(24, 32), Down(32, 48)])
        self.mid1 = cgn(48, 48, 3, dil=2)
        self.mid2 = cgn(48, 48, 3, dil=4)
        self.ups = nn.ModuleList([Up(48, 32, 32), Up(32, 24, 24), Up(24, 16, 16)])
        self.out = nn.Conv1d(16, 1, 1)
    def forward(self, noisy):
        x = self.inp(noisy)
        skips = []
        for d in self.downs:
            x, s = d(x)
            skips.append(s)
        x = x + self.mid2(self.mid1(x))
        for u in self.ups:
            x = u(x, skips.pop())
        return noisy + torch.tanh(self.out(x))
def build_model():
    return WaveUNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    t = torch.arange(L, dtype=torch.float32) / 8000.0
    freq = torch.rand(b, 1, 1, generator=g) * 400 + 100
    clean = 0.5 * torch.sin(2 * torch.pi * freq * t)
    noisy = clean + 0.1 * torch.randn(b, 1, L, generator=g)
    return {"noisy": noisy}, clean
def loss_fn(out, clean):
    return F.l1_loss(out, clean)
