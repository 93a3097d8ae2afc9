"""A message-passing GNN on a batch of graphs written as PyTorch Geometric does (edges numbering the whole batch's nodes, a node-to-graph map): index_select, index_add_, scatter_add pooling."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
N_PER, E_PER = 10, 24
class GIN(nn.Module):
    def __init__(self, d=32, layers=3):
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.mlps = nn.ModuleList(nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d)) for _ in range(layers))
        self.eps = nn.Parameter(torch.zeros(layers))
        self.out = nn.Linear(d, 2)
    def forward(self, x, edges, graph_of, y):
        b, n, f = x.shape
        h = self.inp(x.reshape(b * n, f))
        src, dst = edges[0], edges[1]
        for i, mlp in enumerate(self.mlps):
            agg = torch.zeros_like(h).index_add_(0, dst, h.index_select(0, src))
            h = F.relu(mlp((1 + self.eps[i]) * h + agg))
        pooled = torch.zeros(b, h.shape[1], dtype=h.dtype).scatter_add_(0, graph_of.unsqueeze(1).expand_as(h), h) / n
        return F.cross_entropy(self.out(pooled), y)
def build_model():
    return GIN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    edges = torch.cat([torch.randint(0, N_PER, (2, E_PER), generator=g) + i * N_PER for i in range(b)], 1)
    return {"x": torch.randn(b, N_PER, 8, generator=g), "edges": edges,
            "graph_of": torch.arange(b).repeat_interleave(N_PER), "y": torch.randint(0, 2, (b,), generator=g)}
