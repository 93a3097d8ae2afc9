"""A GRU seq2seq translator with Bahdanau (additive) attention, PyTorch-tutorial style: a bidirectional GRU encoder, a GRUCell decoder unrolled over the target with teacher forcing, attention over encoder states with a source padding mask (masked_fill -inf), output projection tied to the target embedding."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Attn(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.Wq, self.Wk, self.v = nn.Linear(h, h, bias=False), nn.Linear(2 * h, h, bias=False), nn.Linear(h, 1, bias=False)
    def forward(self, q, keys, mask):
        e = self.v(torch.tanh(self.Wq(q).unsqueeze(1) + self.Wk(keys))).squeeze(-1)
        a = e.masked_fill(~mask, float("-inf")).softmax(-1)
        return torch.bmm(a.unsqueeze(1), keys).squeeze(1)
class Seq2Seq(nn.Module):
    def __init__(self, sv=120, tv=100, h=32):
        super().__init__()
        self.semb, self.temb = nn.Embedding(sv, h, padding_idx=0), nn.Embedding(tv, h, padding_idx=0)
        self.enc = nn.GRU(h, h, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * h, h)
        self.attn = Attn(h)
        self.cell = nn.GRUCell(h + 2 * h, h)
        self.pre = nn.Linear(h + 2 * h, h)
        self.out = nn.Linear(h, tv)
        self.out.weight = self.temb.weight
    def forward(self, src, tgt_in, tgt_out):
        mask = src != 0
        keys, hn = self.enc(self.semb(src))
        s = torch.tanh(self.bridge(torch.cat([hn[0], hn[1]], -1)))
        emb = self.temb(tgt_in)
        logits = []
        for t in range(tgt_in.shape[1]):
            ctx = self.attn(s, keys, mask)
            s = self.cell(torch.cat([emb[:, t], ctx], -1), s)
            logits.append(self.out(torch.tanh(self.pre(torch.cat([s, ctx], -1)))))
        logits = torch.stack(logits, 1)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=0)
def build_model():
    return Seq2Seq()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    src = torch.randint(1, 120, (b, 14), generator=g)
    src[:, 10:] = 0  # padding
    tgt = torch.randint(1, 100, (b, 9), generator=g)
    return {"src": src, "tgt_in": tgt[:, :-1].contiguous(), "tgt_out": tgt[:, 1:].contiguous()}
