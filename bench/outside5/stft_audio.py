"""A raw-audio keyword classifier that computes its own log-power spectrogram in forward: torch.stft (return_complex=True) with a Hann window kept as a buffer, .abs().pow(2), log1p, then a 2-D CNN with adaptive pooling."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class SpecCNN(nn.Module):
    def __init__(self, n_fft=128, hop=32, classes=6):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft))
        self.cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((4, 4)), nn.Flatten(),
                                 nn.Linear(32 * 16, classes))
    def forward(self, wave, label):
        spec = torch.stft(wave, self.n_fft, self.hop, window=self.window, return_complex=True)
        feats = torch.log1p(spec.abs().pow(2)).unsqueeze(1)
        feats = (feats - feats.mean(dim=(2, 3), keepdim=True)) / (feats.std(dim=(2, 3), keepdim=True) + 1e-5)
        return F.cross_entropy(self.cnn(feats), label)
def build_model():
    return SpecCNN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"wave": torch.randn(b, 4000, generator=g), "label": torch.randint(0, 6, (b,), generator=g)}
