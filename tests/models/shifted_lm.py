"""A language model handed one token stream per sample, ``(batch, seq + 1)``: its forward slices the inputs
(``tokens[:, :-1]``) and the targets (``tokens[:, 1:]``) itself, so the targets, a view of the batch that is
no contiguous tensor, are made by the first node and read by the loss at the end: a pipeline cut between
them sends a contiguous copy of them (memflow.graph.sending), per micro-batch in flight."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 4
VOCAB, HIDDEN, SEQ = 64, 32, 16


class ShiftedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.block0 = nn.Sequential(nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(),
                                    nn.Linear(4 * HIDDEN, HIDDEN))
        self.block1 = nn.Sequential(nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(),
                                    nn.Linear(4 * HIDDEN, HIDDEN))
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens):
        inp, tgt = tokens[:, :-1], tokens[:, 1:]
        x = self.embed(inp)
        x = x + self.block0(x)
        x = x + self.block1(x)
        logits = self.head(x)
        return F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1))


def build_model():
    return ShiftedLM()


def example_batch(b):
    return {"tokens": torch.randint(0, VOCAB, (b, SEQ + 1), generator=torch.Generator().manual_seed(0))}
