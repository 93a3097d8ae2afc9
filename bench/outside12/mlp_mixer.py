"""A hand-written MLP-Mixer on 32 x 32 images: a 4 x 4 patch-embedding conv to 64 channels (64 patches), flatten(2).transpose(1, 2) into (b, 64 tokens, 64 channels), then 4 Mixer layers, each a pre-LayerNorm token-mixing MLP applied across the patches (the normed tokens transposed to (b, channels, tokens), Linear 64 -> 32, GELU, Linear 32 -> 64, transposed back and added to the residual) followed by a pre-LayerNorm channel-mixing MLP (Linear 64 -> 128, GELU, Linear 128 -> 64, residual); a final LayerNorm, mean over the tokens and a linear head to 10 classes; the model returns the logits and loss_fn is the cross-entropy."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
D, TOKENS, TOK_HID, CH_HID, DEPTH = 64, 64, 32, 128, 4
class MixerLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.tok1, self.tok2 = nn.Linear(TOKENS, TOK_HID), nn.Linear(TOK_HID, TOKENS)
        self.ch1, self.ch2 = nn.Linear(D, CH_HID), nn.Linear(CH_HID, D)
    def forward(self, x):
        y = self.ln1(x).transpose(1, 2)
        x = x + self.tok2(F.gelu(self.tok1(y))).transpose(1, 2)
        return x + self.ch2(F.gelu(self.ch1(self.ln2(x))))
class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, D, 4, 4)
        self.layers = nn.Sequential(*[MixerLayer() for _ in range(DEPTH)])
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, 10)
    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        return self.head(self.ln(self.layers(x)).mean(1))
def build_model():
    return Mixer()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, 10, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
