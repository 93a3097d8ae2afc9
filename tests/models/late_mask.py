"""A batch input (a large integer mask) read by the first node and again by the loss: on a pipeline, the
first stage's copy is needed only by its own reader; the last stage reads its own copy of the batch. The
second block's forward makes a large temporary that needs no gradient (its backward is small): recomputed,
its replay's peak is that of its backward, beside the gradient received for its output when it is last on
its stage."""
import torch
import torch.nn as nn

BATCH_SIZE = 8
T, C, K = 16, 32, 256


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(C, C)

    def forward(self, x, mask):
        return self.lin(x) * mask.sum(-1, keepdim=True).gt(0)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(C, 1)

    def forward(self, h, mask, y):
        w = mask.sum(-1).float()
        return ((self.lin(h).squeeze(-1) - y) ** 2 * w).mean()


class Spike(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(C, C)

    def forward(self, h):
        scale = (h.detach().unsqueeze(-1) * torch.linspace(0.5, 1.5, 64)).amax(-1).sigmoid()
        return self.lin(h) * scale


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = Gate()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(C, C), nn.GELU()), Spike(),
                                     nn.Sequential(nn.Linear(C, C), nn.GELU()), nn.Sequential(nn.Linear(C, C), nn.GELU())])
        self.head = Head()

    def forward(self, x, mask, y):
        h = self.gate(x, mask)
        for b in self.blocks:
            h = h + b(h)
        return self.head(h, mask, y)


def build_model():
    torch.manual_seed(0)
    return Model()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, T, C, generator=g), "mask": torch.randint(0, 2, (b, T, K), generator=g),
            "y": torch.randn(b, T, generator=g)}
