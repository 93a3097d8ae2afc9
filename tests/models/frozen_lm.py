"""A small transformer LM fine-tuned with its embedding and lower blocks frozen."""
import torch
from torch import nn

VOCAB, D, SEQ, LAYERS = 256, 64, 32, 4
BATCH_SIZE = 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, 4, batch_first=True)
        self.ln2 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(D, VOCAB)

    def forward(self, tokens):
        x = self.emb(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def build_model():
    m = LM()
    m.emb.requires_grad_(False)
    for b in m.blocks[:2]:
        b.requires_grad_(False)
    return m


def example_batch(batch_size):
    g = torch.Generator().manual_seed(0)
    t = torch.randint(0, VOCAB, (batch_size, SEQ + 1), generator=g)
    return t[:, :-1].contiguous(), t[:, 1:].contiguous()


def loss_fn(out, y):
    return nn.functional.cross_entropy(out.reshape(-1, VOCAB), y.reshape(-1))
