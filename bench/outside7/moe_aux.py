"""A hand-written switch (top-1) mixture-of-experts LM, 2 layers: router logits -> softmax -> argmax expert per token, dispatch written densely (a one-hot mask contracted with the tokens through einsum over a fixed number of experts, so no shape depends on the data), the experts one batched nn.Parameter of shape (E, d, 4d) (and (E, 4d, d)) applied with torch.einsum, outputs scaled by the chosen expert's probability; a load-balancing auxiliary loss (fraction of tokens per expert x mean router probability) from every layer is added to the LM loss. build_model(experts=4) takes the expert count."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class SwitchFFN(nn.Module):
    def __init__(self, d, experts):
        super().__init__()
        self.experts = experts
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, 4 * d) * d ** -0.5)
        self.b1 = nn.Parameter(torch.zeros(experts, 4 * d))
        self.w2 = nn.Parameter(torch.randn(experts, 4 * d, d) * (4 * d) ** -0.5)
    def forward(self, x):
        probs = self.router(x).softmax(-1)  # b, t, E
        idx = probs.argmax(-1)
        top_p = probs.gather(-1, idx.unsqueeze(-1))
        mask = F.one_hot(idx, self.experts).to(x.dtype)
        xe = torch.einsum("bte,btd->ebtd", mask, x)
        h = F.gelu(torch.einsum("ebtd,edf->ebtf", xe, self.w1) + self.b1[:, None, None])
        y = torch.einsum("ebtd,bte->btd", torch.einsum("ebtf,efd->ebtd", h, self.w2), mask) * top_p
        aux = self.experts * (mask.mean((0, 1)) * probs.mean((0, 1))).sum()
        return y, aux
class Layer(nn.Module):
    def __init__(self, d, heads, experts):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.moe = SwitchFFN(d, experts)
    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, -1)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        y, aux = self.moe(self.ln2(x))
        return x + y, aux
class SwitchLM(nn.Module):
    def __init__(self, vocab=128, d=64, heads=4, layers=2, experts=4, max_len=64, aux_coef=0.01):
        super().__init__()
        self.aux_coef = aux_coef
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.layers = nn.ModuleList([Layer(d, heads, experts) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
    def forward(self, tokens):
        inp, tgt = tokens[:, :-1], tokens[:, 1:]
        x = self.tok(inp) + self.pos(torch.arange(inp.shape[1], device=inp.device))
        aux_total = 0.0
        for layer in self.layers:
            x, aux = layer(x)
            aux_total = aux_total + aux
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)) + self.aux_coef * aux_total
def build_model(experts=4):
    return SwitchLM(experts=experts)
def example_batch(b):
    return {"tokens": torch.randint(0, 128, (b, 33), generator=torch.Generator().manual_seed(0))}
