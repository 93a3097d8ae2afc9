"""A decoder whose blocks each add a mask made from the tokens between modules (as GPT-NeoX's
attention mask): the first block reads it without saving it, and a pipeline cut after that block sends
it on. Recomputing that block makes its checkpoint hold the mask through the block's backward, where no
traced phase holds it (the simulator once left it out: 512 bytes under on GPT-NeoX's first stage)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn

_spec = importlib.util.spec_from_file_location("memflow_test_lm", Path(__file__).resolve().with_name("_lm.py"))
_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lm)

VOCAB, HIDDEN, SEQ = 64, 32, 256
BATCH_SIZE = 8


class MaskedBlock(_lm.Block):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return super().forward(x + mask)  # (an add saves neither input)


class SentMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(MaskedBlock(HIDDEN) for _ in range(2))
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = (tokens > VOCAB // 2).unsqueeze(-1).float().repeat(1, 1, HIDDEN)  # no grad, its own storage
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(x)


def build_model() -> nn.Module:
    return SentMask()


def example_batch(batch_size: int):
    return _lm.token_batch(batch_size, VOCAB, SEQ)


loss_fn = _lm.lm_loss
