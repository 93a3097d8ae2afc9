"""A Transformer language model whose every feed-forward layer is a mixture of experts
(TensorFlowMem's "Transformer w/ MoE" row; Shazeer et al.'s sparsely-gated MoE layer).

Each block: pre-norm causal self-attention, then an MoE feed-forward layer: a linear gate, top-2
routing, and ``E`` experts (``d_model → d_ff → d_model`` with GELU), dispatched GShard-style
with a fixed capacity per expert (``1.25 × tokens × 2 / E``; tokens over it are dropped, as in
GShard), so every shape is static and the step exports. The experts' weights are stacked per
layer (``(E, d_model, d_ff)``) and run as one batched matmul.

``MEMFLOW_MOE_EXPERTS`` sets ``E`` (``KNOBS``: ``memflow fit --max experts`` grows it).

full: 6 blocks, d_model 1024, 16 heads, d_ff 4096, vocab 32000, sequence 256, 12 experts,
BATCH_SIZE 8 (TensorFlowMem's batch of 8 pairs). 50.3 M parameters per expert (over the six
layers) and 91 M others: 0.70 B at 12 experts, 2.51 B at 48 (their Table 3: 0.66 B and 2.5 B).
tiny: 2 blocks, d_model 32, 4 heads, d_ff 64, vocab 100, sequence 16, 4 experts, BATCH_SIZE 4.
Batch: ``(tokens, next_tokens)``; ``loss_fn`` is cross-entropy (the gate's load-balancing loss
is left out: it does not change memory).
"""
from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F
from torch import nn

SCALE = os.environ.get("MEMFLOW_EXAMPLE_SCALE", "full").strip().lower() or "full"
if SCALE not in ("full", "tiny"):
    raise ValueError(f"MEMFLOW_EXAMPLE_SCALE={SCALE!r} is not one of full, tiny")
_FULL = dict(layers=6, d=1024, heads=16, ff=4096, vocab=32000, seq=256, experts=12, batch=8)
_TINY = dict(layers=2, d=32, heads=4, ff=64, vocab=100, seq=16, experts=4, batch=4)
CONFIG = dict(_FULL if SCALE == "full" else _TINY)
_raw = os.environ.get("MEMFLOW_MOE_EXPERTS", "").strip()
if _raw:
    try:
        CONFIG["experts"] = int(_raw)
    except ValueError:
        raise ValueError(f"MEMFLOW_MOE_EXPERTS={_raw!r} is not an integer") from None
    if CONFIG["experts"] < 2:
        raise ValueError(f"MEMFLOW_MOE_EXPERTS={CONFIG['experts']} must be >= 2 (top-2 routing)")
BATCH_SIZE = CONFIG["batch"]
KNOBS = {"experts": {"env": "MEMFLOW_MOE_EXPERTS", "min": 2, "step": 1}}
TOP_K = 2
CAPACITY_FACTOR = 1.25


def _one_hot(index: torch.Tensor, n: int) -> torch.Tensor:
    return (index.unsqueeze(-1) == torch.arange(n, device=index.device)).to(torch.float32)


class MoE(nn.Module):
    def __init__(self, d: int, ff: int, experts: int):
        super().__init__()
        self.experts = experts
        self.gate = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, ff) / math.sqrt(d))
        self.w2 = nn.Parameter(torch.randn(experts, ff, d) / math.sqrt(ff))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        t = x.reshape(b * s, d)
        n_tok, e = t.shape[0], self.experts
        cap = max(1, math.ceil(CAPACITY_FACTOR * TOP_K * n_tok / e))
        probs = torch.softmax(self.gate(t), dim=-1)  # (T, E)
        top_p, top_i = probs.topk(TOP_K, dim=-1)  # (T, k)
        mask = _one_hot(top_i, e)  # (T, k, E)
        # slot of each (token, choice) in its expert's buffer: first choices first, then seconds
        flat = mask.transpose(0, 1).reshape(TOP_K * n_tok, e)
        pos = (torch.cumsum(flat, dim=0) - 1.0) * flat
        keep = flat * (pos < cap).to(flat.dtype)
        pos = pos.reshape(TOP_K, n_tok, e).transpose(0, 1)  # (T, k, E)
        keep = keep.reshape(TOP_K, n_tok, e).transpose(0, 1)
        slot = _one_hot(pos.to(torch.int64).clamp(0, cap - 1), cap) * keep.unsqueeze(-1)  # (T, k, E, C)
        dispatch = slot.sum(1)  # (T, E, C)
        combine = (slot * top_p.unsqueeze(-1).unsqueeze(-1)).sum(1)  # (T, E, C)
        xe = torch.einsum("tec,td->ecd", dispatch, t)  # (E, C, d)
        h = F.gelu(torch.bmm(xe, self.w1))
        ye = torch.bmm(h, self.w2)  # (E, C, d)
        return torch.einsum("tec,ecd->td", combine, ye).reshape(b, s, d)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, ff: int, experts: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.moe = MoE(d, ff, experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.moe(self.ln2(x))


class MoELanguageModel(nn.Module):
    def __init__(self, layers: int, d: int, heads: int, ff: int, vocab: int, seq: int, experts: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, ff, experts) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def build_model() -> nn.Module:
    c = CONFIG
    return MoELanguageModel(c["layers"], c["d"], c["heads"], c["ff"], c["vocab"], c["seq"], c["experts"])


def example_batch(batch_size: int):
    g = torch.Generator(device="cpu").manual_seed(0)
    stream = torch.randint(0, CONFIG["vocab"], (batch_size, CONFIG["seq"] + 1), generator=g)
    stream = stream.to(torch.get_default_device())
    return stream[:, :-1].contiguous(), stream[:, 1:].contiguous()


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))
