"""A small encoder-decoder transformer (``nn.Transformer``, batch first, no dropout) in plain
torch, for the fidelity tests: source and target token embeddings, two encoder and two decoder
layers (the decoder reads the encoder's output in every layer), a causal target mask, a linear
head."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn

_spec = importlib.util.spec_from_file_location("memflow_test_lm", Path(__file__).resolve().with_name("_lm.py"))
_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lm)

VOCAB, HIDDEN, SEQ = 512, 32, 16
BATCH_SIZE = 8


class EncoderDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embed = nn.Embedding(VOCAB, HIDDEN)
        self.tgt_embed = nn.Embedding(VOCAB, HIDDEN)
        self.transformer = nn.Transformer(d_model=HIDDEN, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                                          dim_feedforward=4 * HIDDEN, dropout=0.0, batch_first=True)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
        h = self.transformer(self.src_embed(src), self.tgt_embed(tgt), tgt_mask=mask, tgt_is_causal=True)
        return self.head(h)


def build_model() -> nn.Module:
    return EncoderDecoder()


def example_batch(batch_size: int):
    return _lm.token_batch(batch_size, VOCAB, SEQ, source=SEQ)


loss_fn = _lm.lm_loss
