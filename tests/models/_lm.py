"""Pieces the fidelity tests' language-model files share (not a model file; they load it by path):
a pre-norm MLP block, a seeded token batch and the token cross-entropy."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """``x + down(gelu(up(norm(x))))``."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


def token_batch(batch_size: int, vocab: int, seq: int, *, source: int = 0):
    """``(tokens, next_tokens)``, both ``(batch, seq)``, from a stream seeded 0; with ``source`` the
    inputs are ``(source_tokens, tokens)`` (``source`` of them per sample) for an encoder-decoder."""
    g = torch.Generator().manual_seed(0)
    src = torch.randint(0, vocab, (batch_size, source), generator=g) if source else None
    stream = torch.randint(0, vocab, (batch_size, seq + 1), generator=g)
    tokens, target = stream[:, :-1].contiguous(), stream[:, 1:].contiguous()
    return ((src, tokens) if source else tokens), target


def lm_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross entropy of the logits ``(batch, seq, vocab)`` against the next tokens."""
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))
