"""A seq2seq LSTM translation model with attention (Meng et al.'s "TF-NMT" rows; the
TensorFlow NMT tutorial's attention model).

An embedding and a stack of single-layer LSTMs encode the source; the decoder's LSTM stack
starts from the encoder's final states (layer by layer) and reads the target shifted right;
Luong (scaled dot-product) attention over the encoder outputs follows the decoder (no input
feeding, so every LSTM runs over the whole sequence at once); ``tanh(W [context; output])``,
then the output projection and cross-entropy. The LSTM layers are separate ``nn.LSTM`` modules
in ``nn.ModuleList``s, so a planner can split between them.

full: source vocab 17191, target vocab 7709 (the tutorial's IWSLT English–Vietnamese), 512
units, 2 encoder + 2 decoder layers, 50 time steps (source and target), BATCH_SIZE 128 (26 M
parameters). ``MEMFLOW_NMT_SEQ`` sets the time steps (``KNOBS``' ``seq``), ``MEMFLOW_NMT_LAYERS``
the layers per side.
tiny: vocabs 100 / 80, 32 units, 2 + 2 layers, 12 steps, BATCH_SIZE 4.
Batch: ``((source, target_in), target_out)``, int64 ``(batch, steps)`` each.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

SCALE = os.environ.get("MEMFLOW_EXAMPLE_SCALE", "full").strip().lower() or "full"
if SCALE not in ("full", "tiny"):
    raise ValueError(f"MEMFLOW_EXAMPLE_SCALE={SCALE!r} is not one of full, tiny")
CONFIG = dict(src_vocab=17191, tgt_vocab=7709, hidden=512, layers=2, seq=50, batch=128) if SCALE == "full" \
    else dict(src_vocab=100, tgt_vocab=80, hidden=32, layers=2, seq=12, batch=4)
for _key, _var, _lo in (("seq", "MEMFLOW_NMT_SEQ", 1), ("layers", "MEMFLOW_NMT_LAYERS", 1)):
    _raw = os.environ.get(_var, "").strip()
    if _raw:
        try:
            CONFIG[_key] = int(_raw)
        except ValueError:
            raise ValueError(f"{_var}={_raw!r} is not an integer") from None
        if CONFIG[_key] < _lo:
            raise ValueError(f"{_var}={CONFIG[_key]} must be >= {_lo}")
BATCH_SIZE = CONFIG["batch"]
KNOBS = {"seq": "MEMFLOW_NMT_SEQ", "depth": "MEMFLOW_NMT_LAYERS"}


class LSTMLayer(nn.Module):
    """One single-layer LSTM (batch first) returning its output sequence and final ``(h, c)``."""

    def __init__(self, hidden: int):
        super().__init__()
        self.lstm = nn.LSTM(hidden, hidden, num_layers=1, batch_first=True)

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None, c0: torch.Tensor | None = None):
        out, (h, c) = self.lstm(x) if h0 is None else self.lstm(x, (h0, c0))
        return out, h, c


class Attention(nn.Module):
    """Luong's scaled dot-product attention and the attentional output ``tanh(W [context; h])``."""

    def __init__(self, hidden: int):
        super().__init__()
        self.out = nn.Linear(2 * hidden, hidden, bias=False)

    def forward(self, dec: torch.Tensor, enc: torch.Tensor) -> torch.Tensor:
        scores = torch.bmm(dec, enc.transpose(1, 2)) / dec.shape[-1] ** 0.5  # (B, T_tgt, T_src)
        context = torch.bmm(torch.softmax(scores, dim=-1), enc)
        return torch.tanh(self.out(torch.cat([context, dec], dim=-1)))


class Seq2Seq(nn.Module):
    def __init__(self, src_vocab: int, tgt_vocab: int, hidden: int, layers: int):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, hidden)
        self.tgt_embed = nn.Embedding(tgt_vocab, hidden)
        self.encoder = nn.ModuleList(LSTMLayer(hidden) for _ in range(layers))
        self.decoder = nn.ModuleList(LSTMLayer(hidden) for _ in range(layers))
        self.attention = Attention(hidden)
        self.proj = nn.Linear(hidden, tgt_vocab, bias=False)

    def forward(self, source: torch.Tensor, target_in: torch.Tensor) -> torch.Tensor:
        x = self.src_embed(source)
        states = []
        for layer in self.encoder:
            x, h, c = layer(x)
            states.append((h, c))
        enc = x
        y = self.tgt_embed(target_in)
        for layer, (h, c) in zip(self.decoder, states):
            y, _, _ = layer(y, h, c)
        return self.proj(self.attention(y, enc))  # (B, T_tgt, tgt_vocab) logits


def build_model() -> nn.Module:
    return Seq2Seq(CONFIG["src_vocab"], CONFIG["tgt_vocab"], CONFIG["hidden"], CONFIG["layers"])


def example_batch(batch_size: int):
    g = torch.Generator(device="cpu").manual_seed(0)
    src = torch.randint(0, CONFIG["src_vocab"], (batch_size, CONFIG["seq"]), generator=g)
    tgt = torch.randint(0, CONFIG["tgt_vocab"], (batch_size, CONFIG["seq"] + 1), generator=g)
    dev = torch.get_default_device()
    return (src.to(dev), tgt[:, :-1].contiguous().to(dev)), tgt[:, 1:].contiguous().to(dev)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))
