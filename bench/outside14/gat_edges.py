"""A hand-written two-layer graph attention network (GAT, Velickovic et al.) doing node classification on a batch of graphs that share one fixed random edge list of 12 nodes (40 random directed edges plus self-loops, built once in build_model from a seeded generator and kept as index buffers): node features projected per head (4 heads of 8), per-edge attention logits from gathers of the source and destination nodes' projections (index_select along the node dimension) dotted with learned attention vectors + LeakyReLU(0.2), a softmax over each destination's incoming edges done by hand (the per-destination maximum by scatter_reduce "amax" with include_self=False, exp of the shifted logits, the per-destination sum by index_add_ into a fresh zeros tensor, gathered back and divided), attention dropout 0.1, the weighted source messages aggregated with index_add_ into a fresh zeros tensor, heads concatenated + ELU after the first layer and averaged after the second (one head of 5 classes); cross-entropy over every node in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
N, FIN, E = 12, 16, 40
class GATLayer(nn.Module):
    def __init__(self, fin, heads, dout, concat):
        super().__init__()
        self.lin = nn.Linear(fin, heads * dout, bias=False)
        self.a_src = nn.Parameter(0.1 * torch.randn(heads, dout))
        self.a_dst = nn.Parameter(0.1 * torch.randn(heads, dout))
        self.bias = nn.Parameter(torch.zeros(heads * dout if concat else dout))
        self.heads, self.dout, self.concat = heads, dout, concat
    def forward(self, x, src, dst):
        b, n, _ = x.shape
        h = self.lin(x).view(b, n, self.heads, self.dout)
        hs, hd = h.index_select(1, src), h.index_select(1, dst)          # b, E, H, D
        e = F.leaky_relu((hs * self.a_src).sum(-1) + (hd * self.a_dst).sum(-1), 0.2)  # b, E, H
        idx = dst.view(1, -1, 1).expand_as(e)
        emax = e.new_zeros(b, n, self.heads).scatter_reduce(1, idx, e, "amax", include_self=False)
        w = torch.exp(e - emax.gather(1, idx))
        denom = e.new_zeros(b, n, self.heads)
        denom.index_add_(1, dst, w)
        alpha = F.dropout(w / denom.gather(1, idx), 0.1, self.training)
        out = h.new_zeros(b, n, self.heads, self.dout)
        out.index_add_(1, dst, alpha.unsqueeze(-1) * hs)
        out = out.flatten(2) if self.concat else out.mean(2)
        return out + self.bias
class GAT(nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        src = torch.randint(0, N, (E,), generator=g)
        dst = torch.randint(0, N, (E,), generator=g)
        loops = torch.arange(N)
        self.register_buffer("src", torch.cat([src, loops]))
        self.register_buffer("dst", torch.cat([dst, loops]))
        self.l1 = GATLayer(FIN, 4, 8, True)
        self.l2 = GATLayer(32, 1, 5, False)
    def forward(self, x):
        x = F.dropout(x, 0.1, self.training)
        h = F.elu(self.l1(x, self.src, self.dst))
        return self.l2(h, self.src, self.dst)
def build_model():
    return GAT()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, N, FIN, generator=g), torch.randint(0, 5, (b, N), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out.reshape(-1, 5), y.reshape(-1))
