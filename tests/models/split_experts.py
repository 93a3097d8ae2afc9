"""A mixture of experts that splits its tokens per expert by their counts read from a tensor
(``.tolist()``, as HF's JetMoE and ScatterMoE do): each expert's linear runs on as many rows as the router
sent it, so the step's tensor sizes depend on the batch's routing."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 4
HIDDEN, EXPERTS = 16, 4


class SplitMoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(HIDDEN, EXPERTS)
        self.experts = nn.ModuleList(nn.Linear(HIDDEN, HIDDEN) for _ in range(EXPERTS))

    def forward(self, x):
        gate = self.router(x).softmax(-1)
        top = gate.argmax(-1)
        counts = torch.zeros_like(gate).scatter(1, top[:, None], 1).long().sum(0).tolist()
        _, order = top.sort(0)
        pieces = x[order].split(counts)
        out = torch.cat([e(p) for e, p in zip(self.experts, pieces)])
        return torch.zeros_like(x).index_add(0, order, out) * gate.gather(-1, top[:, None])


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, HIDDEN)
        self.moe = SplitMoE()
        self.out = nn.Linear(HIDDEN, 1)

    def forward(self, x, y):
        return F.mse_loss(self.out(self.moe(self.inp(x))), y)


def build_model():
    return Model()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 8, generator=g), "y": torch.randn(b, 1, generator=g)}
