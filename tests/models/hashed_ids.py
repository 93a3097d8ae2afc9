"""CANINE's shape in plain torch: character ids hashed into buckets (the ids themselves read by the hashing
alone, nothing saves them), a character encoder, a strided downsampling to a short sequence, a block over it,
and an upsampling branch that reads the character encoding and runs but that the loss never reads (the
pooled head reads the short sequence's first position). Cut before the upsampling, the character encoding
crosses to the later stage and gets no gradient back."""
import torch, torch.nn as nn, torch.nn.functional as F

BATCH_SIZE = 4
BUCKETS, D, L, RATE = 97, 32, 32, 4


class Hash(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(BUCKETS, D)

    def forward(self, ids):
        return self.emb((ids * 31 + 7) % BUCKETS) + self.emb((ids * 17 + 3) % BUCKETS)


class Down(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(D, D, RATE, stride=RATE)

    def forward(self, h):
        return self.conv(h.transpose(1, 2)).transpose(1, 2)


class Up(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(2 * D, D)

    def forward(self, h, mol):
        return torch.tanh(self.proj(torch.cat([h, mol.repeat_interleave(RATE, dim=1)], dim=-1)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(D), nn.Linear(D, 2 * D), nn.Linear(2 * D, D)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Pool(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D)

    def forward(self, x):
        return torch.tanh(self.fc(x[:, 0]))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.hash = Hash()
        self.chars = nn.Sequential(nn.Linear(D, D), nn.GELU())
        self.down = Down()
        self.block0, self.block1 = Block(), Block()
        self.pool = Pool()
        self.up = Up()
        self.head = nn.Linear(D, 3)

    def forward(self, ids, y):
        h = self.chars(self.hash(ids))
        mol = self.down(h)
        mol = self.block1(self.block0(mol))
        up = self.up(h, mol)
        pooled = self.pool(mol)
        return {"loss": F.cross_entropy(self.head(pooled), y), "up": up}


def build_model():
    torch.manual_seed(0)
    return Model()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(32, 1200, (b, L), generator=g), "y": torch.randint(0, 3, (b,), generator=g)}
