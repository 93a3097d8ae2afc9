"""An LSTM language model keeping its hidden state on the module for the next call (truncated BPTT as
many write it: ``self.hidden = (h.detach(), c.detach())`` in forward). ``CARRY=0`` leaves it out. Its
head has the old hook-based ``weight_norm``, whose hook sets ``head.weight`` before every forward: made
anew each call, not carried. ``CARRY=reset`` sets it to None first in every forward (HF RecurrentGemma
with ``use_cache=False``): a state set anew each call, read by none, not carried."""
import os

import warnings

import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 4
CARRY = os.environ.get("CARRY", "1") in ("1", "reset")
RESET = os.environ.get("CARRY") == "reset"


class LM(nn.Module):
    def __init__(self, vocab=32, d=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = nn.LSTM(d, d, batch_first=True)
        self.head = torch.nn.utils.weight_norm(nn.Linear(d, vocab))
        self.hidden = None

    def forward(self, ids, tgt):
        if RESET:
            self.hidden = None
        h0 = self.hidden if self.hidden is not None and self.hidden[0].shape[1] == ids.shape[0] else None
        out, h = self.rnn(self.emb(ids), h0)
        if CARRY:
            self.hidden = tuple(x.detach() for x in h)
        return F.cross_entropy(self.head(out).flatten(0, 1), tgt.flatten())


def build_model():
    with warnings.catch_warnings():  # (torch deprecates the hook-based weight_norm)
        warnings.simplefilter("ignore")
        return LM()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 32, (b, 8), generator=g), "tgt": torch.randint(0, 32, (b, 8), generator=g)}
