"""A small encoder-decoder transformer (``nn.Transformer``, batch first, no dropout) in plain
torch, for the fidelity tests: source and target token embeddings, two encoder and two decoder
layers (the decoder reads the encoder's output in every layer), a causal target mask, a linear
head."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

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
    g = torch.Generator().manual_seed(0)
    src = torch.randint(0, VOCAB, (batch_size, SEQ), generator=g)
    tgt = torch.randint(0, VOCAB, (batch_size, SEQ + 1), generator=g)
    return (src, tgt[:, :-1].contiguous()), tgt[:, 1:].contiguous()


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.reshape(-1, VOCAB), target.reshape(-1))
