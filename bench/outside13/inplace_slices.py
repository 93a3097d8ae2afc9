"""A hand-written CNN that writes into slices of its activations in place: a 3x3 conv stem to 16 channels, then three blocks that each compute a conv + BatchNorm output h, squash its first half of the channels in place through a slice assignment (h[:, :8] = torch.tanh(h[:, :8])), scale its second half in place (h[:, 8:].mul_(0.5)), add the block input with out.add_(x) and a final torch.relu_; a max-pool between blocks 1 and 2; global average pooling and a linear classifier to 6 classes, with cross-entropy in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Block(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
    def forward(self, x):
        h = self.bn(self.conv(x))
        h[:, :8] = torch.tanh(h[:, :8])
        h[:, 8:].mul_(0.5)
        h.add_(x)
        return torch.relu_(h)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.b1, self.b2, self.b3 = Block(), Block(), Block()
        self.fc = nn.Linear(16, 6)
    def forward(self, x):
        h = self.b1(self.stem(x))
        h = self.b3(self.b2(F.max_pool2d(h, 2)))
        return self.fc(h.mean((2, 3)))
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 24, 24, generator=g), torch.randint(0, 6, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
