"""What models do inside forward that the capture must see through: torch's reentrant checkpoint
(``checkpoint(block, x, use_reentrant=True)``, the old default, and ``checkpoint_sequential``) around
MLP-mixer blocks, and a router that casts its classifier to float32 in every forward (HF Switch
Transformers' habit: ``self.classifier = self.classifier.to(torch.float32)``), here with dense top-1
dispatch over two experts."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

BATCH_SIZE = 8


class Mix(nn.Module):
    def __init__(self, t, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok = nn.Sequential(nn.Linear(t, 2 * t), nn.GELU(), nn.Linear(2 * t, t))
        self.ch = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.tok(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.ln2(x))


class Router(nn.Module):
    def __init__(self, d, n=2):
        super().__init__()
        self.classifier = nn.Linear(d, n, bias=False)
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(n))

    def forward(self, x):
        self.classifier = self.classifier.to(torch.float32)
        p = self.classifier(x.float()).softmax(-1)
        top = F.one_hot(p.argmax(-1), p.shape[-1]) * p
        return x + sum(top[..., e:e + 1] * ex(x) for e, ex in enumerate(self.experts))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 16, 4, 4)
        self.blocks = nn.ModuleList(Mix(16, 16) for _ in range(2))
        self.tail = nn.Sequential(Mix(16, 16), Mix(16, 16))
        self.router = Router(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=True)
        x = checkpoint_sequential(self.tail, 2, x, use_reentrant=True)
        return self.head(self.router(x).mean(1))


def build_model():
    return Net()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 16, 16, generator=g), torch.randint(0, 10, (b,), generator=g)


def loss_fn(out, y):
    return F.cross_entropy(out, y)
