"""A hand-written GRU encoder-decoder NMT model (Meng et al. style): one nn.Embedding shared (tied) between the source tokens, the target tokens fed to the decoder and the output projection (F.linear with the embedding weight); a bidirectional single-layer nn.GRU encoder (batch_first) whose two directions' final hidden states are summed to initialise the decoder; a source padding mask built in forward from the source lengths (arange < lengths); the decoder is an explicit Python loop over the target steps with one nn.GRUCell (teacher forcing: the gold previous token is the input), dot-product attention of each step's state over the encoder outputs (the two directions' outputs summed) with masked_fill(-inf) on padding, softmax, a context vector concatenated with the state and projected; every step's logits are stacked and the cross-entropy with ignore_index for the target padding is computed inside forward (the model returns the scalar loss)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, D, H, PAD = 120, 32, 32, 0
class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D, padding_idx=PAD)
        self.enc = nn.GRU(D, H, batch_first=True, bidirectional=True)
        self.cell = nn.GRUCell(D, H)
        self.combine = nn.Linear(2 * H, D)
    def forward(self, src, src_len, tgt_in, tgt_out):
        mask = torch.arange(src.shape[1], device=src.device)[None, :] < src_len[:, None]
        enc_out, h = self.enc(self.emb(src))
        enc_out = enc_out[..., :H] + enc_out[..., H:]
        state = h[0] + h[1]
        tgt_emb = self.emb(tgt_in)
        logits = []
        for t in range(tgt_in.shape[1]):
            state = self.cell(tgt_emb[:, t], state)
            scores = torch.bmm(enc_out, state.unsqueeze(2)).squeeze(2)
            attn = scores.masked_fill(~mask, float("-inf")).softmax(-1)
            ctx = torch.bmm(attn.unsqueeze(1), enc_out).squeeze(1)
            out = torch.tanh(self.combine(torch.cat([state, ctx], -1)))
            logits.append(F.linear(out, self.emb.weight))
        logits = torch.stack(logits, 1)
        return F.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=PAD)
def build_model():
    return Seq2Seq()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    S, T = 12, 10
    src_len = torch.randint(5, S + 1, (b,), generator=g)
    src_len[0] = S
    src = torch.randint(3, V, (b, S), generator=g)
    src[torch.arange(S)[None, :] >= src_len[:, None]] = PAD
    tgt_len = torch.randint(4, T + 1, (b,), generator=g)
    tgt = torch.randint(3, V, (b, T + 1), generator=g)
    tgt[:, 0] = 1
    tgt[torch.arange(T + 1)[None, :] > tgt_len[:, None]] = PAD
    return {"src": src, "src_len": src_len, "tgt_in": tgt[:, :-1].contiguous(), "tgt_out": tgt[:, 1:].contiguous()}
