"""A graph classifier with top-k pooling (Graph U-Net gPool) on dense batched graphs: GCN layers as normalised-adjacency matmuls, node scores from a learned projection, the k=12 best nodes kept by torch.topk and torch.gather on the features and on both axes of the adjacency, their features gated by tanh of the score, max + mean readout."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class GCN(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)
    def forward(self, x, adj):
        a = adj + torch.eye(adj.shape[-1], device=adj.device)
        deg = a.sum(-1).clamp(min=1).rsqrt()
        return F.relu(deg.unsqueeze(-1) * (a @ (deg.unsqueeze(-1) * self.lin(x))))
class TopKPool(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.k = k
        self.p = nn.Parameter(torch.randn(d))
    def forward(self, x, adj):
        score = x @ self.p / self.p.norm()  # b, n
        top, idx = torch.topk(score, self.k, dim=1)
        x = torch.gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, x.shape[-1])) * torch.tanh(top).unsqueeze(-1)
        adj = torch.gather(adj, 1, idx.unsqueeze(-1).expand(-1, -1, adj.shape[-1]))
        adj = torch.gather(adj, 2, idx.unsqueeze(1).expand(-1, self.k, -1))
        return x, adj
class GraphUNetCls(nn.Module):
    def __init__(self, d_in=16, d=64, n_cls=4):
        super().__init__()
        self.gcn1, self.pool1 = GCN(d_in, d), TopKPool(d, 12)
        self.gcn2, self.pool2 = GCN(d, d), TopKPool(d, 6)
        self.gcn3 = GCN(d, d)
        self.head = nn.Sequential(nn.Linear(2 * d, d), nn.ReLU(), nn.Linear(d, n_cls))
    def forward(self, x, adj, labels):
        x = self.gcn1(x, adj)
        x, adj = self.pool1(x, adj)
        x = self.gcn2(x, adj)
        x, adj = self.pool2(x, adj)
        x = self.gcn3(x, adj)
        return F.cross_entropy(self.head(torch.cat([x.max(1).values, x.mean(1)], -1)), labels)
def build_model():
    return GraphUNetCls()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    a = (torch.rand(b, 24, 24, generator=g) < 0.2).float()
    return {"x": torch.randn(b, 24, 16, generator=g), "adj": ((a + a.transpose(1, 2)) > 0).float(),
            "labels": torch.randint(0, 4, (b,), generator=g)}
