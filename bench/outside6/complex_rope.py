"""A LLaMA-style causal LM written the way Meta's reference model.py does its rotary embeddings: a complex64 buffer of torch.polar frequencies, q and k reshaped into pairs and turned complex with torch.view_as_complex, multiplied, and turned back with torch.view_as_real; RMSNorm, SwiGLU, scaled_dot_product_attention(is_causal=True)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    freqs = torch.outer(torch.arange(end).float(), freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64
def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)
class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
class Block(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.h, self.hd = n_heads, d // n_heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1, self.w3 = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False)
        self.w2 = nn.Linear(2 * d, d, bias=False)
        self.attn_norm, self.ffn_norm = RMSNorm(d), RMSNorm(d)
    def forward(self, x, freqs_cis):
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q, k, v = (w(h).view(b, t, self.h, self.hd) for w in (self.wq, self.wk, self.wv))
        q, k = apply_rotary_emb(q, k, freqs_cis)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.wo(o.transpose(1, 2).reshape(b, t, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))
class Llama(nn.Module):
    def __init__(self, vocab=256, d=64, n_layers=3, n_heads=4, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Block(d, n_heads) for _ in range(n_layers))
        self.norm = RMSNorm(d)
        self.output = nn.Linear(d, vocab, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(d // n_heads, max_len), persistent=False)
    def forward(self, tokens, targets):
        h = self.tok(tokens)
        freqs_cis = self.freqs_cis[: tokens.shape[1]]
        for layer in self.layers:
            h = layer(h, freqs_cis)
        logits = self.output(self.norm(h))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
def build_model():
    return Llama()
def example_batch(b):
    ids = torch.randint(0, 256, (b, 33), generator=torch.Generator().manual_seed(0))
    return {"tokens": ids[:, :-1].contiguous(), "targets": ids[:, 1:].contiguous()}
