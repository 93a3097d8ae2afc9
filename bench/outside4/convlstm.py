"""A ConvLSTM next-frame predictor: one ConvLSTM cell (a conv over [x, h] split into four gates) stepped over 6 frames in a Python loop, a 1x1 conv decoding each hidden state."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Cell(nn.Module):
    def __init__(self, cin, ch):
        super().__init__()
        self.ch = ch
        self.conv = nn.Conv2d(cin + ch, 4 * ch, 3, padding=1)
    def forward(self, x, h, c):
        i, f, o, g = self.conv(torch.cat([x, h], 1)).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
class Predictor(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = Cell(1, 16)
        self.dec = nn.Conv2d(16, 1, 1)
    def forward(self, frames):
        b, t, _, hgt, wid = frames.shape
        h = c = torch.zeros(b, 16, hgt, wid)
        loss = 0
        for s in range(t - 1):
            h, c = self.cell(frames[:, s], h, c)
            loss = loss + F.mse_loss(self.dec(h), frames[:, s + 1])
        return loss / (t - 1)
def build_model():
    return Predictor()
def example_batch(b):
    return {"frames": torch.rand(b, 6, 1, 16, 16, generator=torch.Generator().manual_seed(0))}
