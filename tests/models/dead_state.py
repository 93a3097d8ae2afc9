"""A recurrence written in plain torch, RWKV's CPU path's way: every time step updates a state, the last
update's result is read by nothing (a dead branch of the graph) and its op saved its own output
(sigmoid): no backward runs through it, so what it saved dies with the forward, unless something holds
the saved tensors outside autograd."""
import torch, torch.nn as nn, torch.nn.functional as F

BATCH_SIZE = 4


class Recurrence(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.key = nn.Linear(d, d)
        self.decay = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        k = self.key(x)
        out = torch.zeros_like(k)
        state = torch.zeros_like(k[:, 0])
        for i in range(k.shape[1]):
            out[:, i] = torch.tanh(k[:, i] + state)
            state = torch.sigmoid(state * self.decay + k[:, i])  # (the last one: read by nothing)
        return x + out


class Model(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.blocks = nn.ModuleList(Recurrence(d) for _ in range(3))
        self.head = nn.Linear(d, d)

    def forward(self, x, y):
        for b in self.blocks:
            x = b(x)
        return F.mse_loss(self.head(x), y)


def build_model():
    torch.manual_seed(0)
    return Model()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 16, 64, generator=g), "y": torch.randn(b, 16, 64, generator=g)}
