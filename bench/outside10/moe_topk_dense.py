"""A hand-written mixture-of-experts causal transformer LM (3 pre-LN blocks, d 32, 4 heads) with fixed-shape routing: each block's router is a linear to 4 experts, softmax probabilities, torch.topk picks 2 experts per token, the renormalised top-2 weights are scattered (Tensor.scatter) into a zero gate matrix of shape tokens x experts (zero where not routed); all 4 experts run on every token as one batched weight tensor (experts x d x f, and back) with torch.einsum and GELU, and the expert outputs are combined with the gate matrix by einsum; a Switch-style load-balancing auxiliary loss (fraction of tokens routed to each expert, from a one_hot of the top-k indices, times the mean router probability) is accumulated across blocks in a Python float/tensor sum and added (times 0.01) to the shifted causal LM cross-entropy, the causal mask built in forward by torch.triu; token and learned position embeddings, the output head tied to the token embedding; the model returns the scalar loss."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, D, NH, E, K, FF, L, S = 128, 32, 4, 4, 2, 64, 3, 16
class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(D, E, bias=False)
        self.w1 = nn.Parameter(torch.randn(E, D, FF) * 0.02)
        self.b1 = nn.Parameter(torch.zeros(E, FF))
        self.w2 = nn.Parameter(torch.randn(E, FF, D) * 0.02)
    def forward(self, x):
        probs = self.router(x).softmax(-1)
        topv, topi = torch.topk(probs, K, dim=-1)
        topv = topv / topv.sum(-1, keepdim=True)
        gate = torch.zeros_like(probs).scatter(-1, topi, topv)
        h = F.gelu(torch.einsum("btd,edf->btef", x, self.w1) + self.b1)
        y = torch.einsum("btef,efd->bted", h, self.w2)
        out = torch.einsum("bted,bte->btd", y, gate)
        frac = F.one_hot(topi, E).float().sum(-2).mean((0, 1)) / K
        aux = E * (frac * probs.mean((0, 1))).sum()
        return out, aux
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, NH, dropout=0.0, batch_first=True)
        self.moe = MoE()
    def forward(self, x, causal):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        y, aux = self.moe(self.ln2(x))
        return x + y, aux
class MoELM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(S, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln = nn.LayerNorm(D)
    def forward(self, input_ids):
        T = input_ids.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=input_ids.device), 1)
        x = self.tok(input_ids) + self.pos(torch.arange(T, device=input_ids.device))
        aux_total = 0.0
        for blk in self.blocks:
            x, aux = blk(x, causal)
            aux_total = aux_total + aux
        logits = F.linear(self.ln(x), self.tok.weight)
        lm = F.cross_entropy(logits[:, :-1].reshape(-1, V), input_ids[:, 1:].reshape(-1))
        return lm + 0.01 * aux_total
def build_model():
    return MoELM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(0, V, (b, S), generator=g)}
