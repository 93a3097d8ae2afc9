"""A tied embedding read twice on the first stage and once on the last (a seq2seq's source and target
tokens, and its output projection), for the tests of a replica's gradient.

Cut after the target's embedding, the first stage's first backward is that second call's: it makes the
embedding's gradient there, then the encoder output's (the two halves' sum, taken apart: the phase's peak). On one device
the output projection made the gradient first, so the trace of that backward added its new gradient into
it and let it go: the stage holds it, through the rest of the phase.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

V, D, S, T = 96, 32, 12, 10
BATCH_SIZE = 4


class TiedTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D, padding_idx=0)
        self.enc = nn.Linear(D, 2 * D)
        self.dec = nn.Linear(D, D)

    def forward(self, src, tgt_in, tgt_out):
        e = self.enc(self.emb(src))
        e = e[..., :D] + e[..., D:]
        t = self.emb(tgt_in)
        h = torch.tanh(self.dec(t) + e.mean(1, keepdim=True))
        logits = F.linear(h, self.emb.weight)
        return F.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=0)


def build_model() -> nn.Module:
    return TiedTwice()


def example_batch(batch_size: int):
    g = torch.Generator().manual_seed(0)
    src = torch.randint(1, V, (batch_size, S), generator=g)
    tgt = torch.randint(1, V, (batch_size, T + 1), generator=g)
    return {"src": src, "tgt_in": tgt[:, :-1].contiguous(), "tgt_out": tgt[:, 1:].contiguous()}
