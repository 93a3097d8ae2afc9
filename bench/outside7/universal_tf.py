"""A Universal-Transformer-style LM: ONE pre-LN transformer block (hand-written causal attention through F.scaled_dot_product_attention(is_causal=True), a SwiGLU MLP split with chunk) applied 6 times in a Python loop, a learned per-step embedding added before each application, the output projection tied to the token embedding (F.linear(h, self.tok.weight)); next-token cross-entropy. The same weights are read six times in one step."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Block(nn.Module):
    def __init__(self, d=64, heads=4, ff=128):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.ln2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)
    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        gate, up = self.up(self.ln2(x)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)
class UniversalTransformer(nn.Module):
    def __init__(self, vocab=128, d=64, steps=6, max_len=64):
        super().__init__()
        self.steps = steps
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(max_len, d) * 0.02)
        self.step_emb = nn.Embedding(steps, d)
        self.block = Block(d)
        self.ln_f = nn.LayerNorm(d)
        nn.init.normal_(self.tok.weight, std=0.02)
    def forward(self, tokens):
        inp, tgt = tokens[:, :-1], tokens[:, 1:]
        h = self.tok(inp) + self.pos[: inp.shape[1]]
        for s in range(self.steps):
            h = self.block(h + self.step_emb.weight[s])
        logits = F.linear(self.ln_f(h), self.tok.weight)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
def build_model():
    return UniversalTransformer()
def example_batch(b):
    return {"tokens": torch.randint(0, 128, (b, 33), generator=torch.Generator().manual_seed(0))}
