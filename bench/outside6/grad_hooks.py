"""A CNN classifier that edits its own gradients: forward registers a tensor hook on the stem's output (h.register_hook(lambda g: g * 0.5), halving the gradient into the stem), and __init__ puts a register_full_backward_hook on the middle block that clamps its grad_input to [-0.01, 0.01]."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
def block(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.GroupNorm(4, cout), nn.ReLU())
class HookedCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = block(3, 16, 1)
        self.mid = nn.Sequential(block(16, 32, 2), block(32, 32, 1))
        self.top = block(32, 64, 2)
        self.head = nn.Linear(64, 10)
        self.mid.register_full_backward_hook(self._clamp)
    @staticmethod
    def _clamp(module, grad_input, grad_output):
        return tuple(None if g is None else g.clamp(-0.01, 0.01) for g in grad_input)
    def forward(self, img, labels):
        h = self.stem(img)
        if h.requires_grad:
            h.register_hook(lambda g: g * 0.5)
        h = self.top(self.mid(h))
        return F.cross_entropy(self.head(h.mean((2, 3))), labels)
def build_model():
    return HookedCNN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"img": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
