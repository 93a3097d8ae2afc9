"""A hand-written causal language model with Mixture-of-Depths blocks (Raposo et al.): 4 pre-LayerNorm transformer blocks of d 32 (4 heads, MLP 64, scaled_dot_product_attention), the dense ones (0 and 2) ordinary and the routed ones (1 and 3) processing only half the tokens: a linear router scores each token, torch.topk picks the 8 best of 16 per sequence, the indices are sorted so causal order holds, the chosen tokens are gathered (torch.gather with expanded indices), run through the block's attention (causal among themselves) and MLP, and the block's update times the sigmoid of the router score is written back into the residual stream: in block 1 by an out-of-place Tensor.scatter_add along the sequence, in block 3 by index_put with (batch, position) index tensors and accumulate=True; learned position embeddings, a final LayerNorm and a decoder tied to the token embedding (initialised with std 0.02); shifted cross-entropy in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, D, T, H = 128, 32, 16, 4
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 64), nn.GELU(), nn.Linear(64, D))
    def delta(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, D))
        return a + self.mlp(self.n2(x + a))
class MoDBlock(Block):
    def __init__(self, mode):
        super().__init__()
        self.router = nn.Linear(D, 1)
        self.mode = mode
    def forward(self, x):
        b, t, _ = x.shape
        score = self.router(x).squeeze(-1)                       # b, t
        idx = torch.topk(score, t // 2, dim=1).indices.sort(dim=1).values
        w = torch.sigmoid(score.gather(1, idx)).unsqueeze(-1)    # b, k, 1
        gidx = idx.unsqueeze(-1).expand(-1, -1, D)
        upd = self.delta(torch.gather(x, 1, gidx)) * w
        if self.mode == "scatter":
            return x.scatter_add(1, gidx, upd)
        rows = torch.arange(b, device=x.device).unsqueeze(1).expand_as(idx)
        return x.index_put((rows, idx), upd, accumulate=True)
class Dense(Block):
    def forward(self, x):
        return x + self.delta(x)
class MoDLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(V, D), nn.Parameter(0.02 * torch.randn(T, D))
        nn.init.normal_(self.emb.weight, std=0.02)
        self.blocks = nn.ModuleList([Dense(), MoDBlock("scatter"), Dense(), MoDBlock("index_put")])
        self.norm = nn.LayerNorm(D)
        self.dec = nn.Linear(D, V, bias=False)
        self.dec.weight = self.emb.weight
    def forward(self, ids):
        x = self.emb(ids) + self.pos[: ids.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.dec(self.norm(x))
def build_model():
    return MoDLM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (b, T + 1), generator=g)
    return ids[:, :-1], ids[:, 1:]
def loss_fn(out, y):
    return F.cross_entropy(out.reshape(-1, V), y.reshape(-1))
