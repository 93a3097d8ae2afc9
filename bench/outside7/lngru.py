"""A language model on a hand-written layer-normalised GRU cell (input and hidden projections each through nn.Linear and its own LayerNorm, the three gates split with chunk), two stacked cells unrolled in a Python loop over 24 steps, the output projection tied to the token embedding (F.linear with the embedding's weight and a separate bias); next-token cross-entropy."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class LNGRUCell(nn.Module):
    def __init__(self, d_in, d):
        super().__init__()
        self.ih = nn.Linear(d_in, 3 * d)
        self.hh = nn.Linear(d, 3 * d, bias=False)
        self.ln_i = nn.LayerNorm(3 * d)
        self.ln_h = nn.LayerNorm(3 * d)
    def forward(self, x, h):
        ir, iz, inn = self.ln_i(self.ih(x)).chunk(3, -1)
        hr, hz, hn = self.ln_h(self.hh(h)).chunk(3, -1)
        r = torch.sigmoid(ir + hr)
        z = torch.sigmoid(iz + hz)
        n = torch.tanh(inn + r * hn)
        return (1 - z) * n + z * h
class LNGRULM(nn.Module):
    def __init__(self, vocab=100, d=48, layers=2):
        super().__init__()
        self.d = d
        self.emb = nn.Embedding(vocab, d)
        self.cells = nn.ModuleList([LNGRUCell(d, d) for _ in range(layers)])
        self.out_bias = nn.Parameter(torch.zeros(vocab))
        nn.init.normal_(self.emb.weight, std=0.02)
    def forward(self, tokens):
        inp, tgt = tokens[:, :-1], tokens[:, 1:]
        x = self.emb(inp)
        hs = [x.new_zeros(x.shape[0], self.d) for _ in self.cells]
        outs = []
        for t in range(x.shape[1]):
            h = x[:, t]
            for i, cell in enumerate(self.cells):
                hs[i] = cell(h, hs[i])
                h = hs[i]
            outs.append(h)
        logits = F.linear(torch.stack(outs, 1), self.emb.weight, self.out_bias)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
def build_model():
    return LNGRULM()
def example_batch(b):
    return {"tokens": torch.randint(0, 100, (b, 25), generator=torch.Generator().manual_seed(0))}
