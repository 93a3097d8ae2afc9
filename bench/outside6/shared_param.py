"""A causal MLP language model whose parameters are shared across what would be pipeline stages: the token table is a bare nn.Parameter looked up by indexing (self.table[ids]) at the input and multiplied (h @ table.T) at the output, and the first and last of eight blocks own one gate Parameter together (assigned to both); tokens mix causally by a cumulative mean."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mix = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.gate = nn.Parameter(torch.ones(d))
    def forward(self, x):
        h = self.ln1(x)
        counts = torch.arange(1, x.shape[1] + 1, device=x.device, dtype=x.dtype).view(1, -1, 1)
        x = x + self.mix(torch.cumsum(h, dim=1) / counts)
        return x + self.gate * self.ff(self.ln2(x))
class SharedLM(nn.Module):
    def __init__(self, vocab=256, d=64, n_layers=8):
        super().__init__()
        self.table = nn.Parameter(torch.randn(vocab, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d) for _ in range(n_layers))
        self.blocks[-1].gate = self.blocks[0].gate
        self.ln = nn.LayerNorm(d)
    def forward(self, ids):
        h = self.table[ids]
        for blk in self.blocks:
            h = blk(h)
        logits = self.ln(h) @ self.table.t()
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
def build_model():
    return SharedLM()
def example_batch(b):
    return {"ids": torch.randint(0, 256, (b, 32), generator=torch.Generator().manual_seed(0))}
