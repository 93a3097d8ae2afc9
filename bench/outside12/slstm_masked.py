"""A hand-written xLSTM-style sLSTM language model over padded sequences: an embedding of 64 tokens to d 32 whose padded positions are zeroed in place with a boolean-mask assignment (x[~mask] = 0.0 on the embedding output); one sLSTM layer with 4 heads run by a Python loop over the 16 time steps: the input-side gate pre-activations for all steps come from one Linear(d, 4d), the recurrent side is a block-diagonal head-wise matrix (an nn.Parameter of shape (4, 8, 32) applied with torch.einsum to the previous hidden state); exponential gating with a log-space stabiliser (m_t = max(logsigmoid(f) + m, i), i' = exp(i - m_t), f' = exp(logsigmoid(f) + m - m_t)), cell c = f' c + i' tanh(z), normaliser n = f' n + i', h = sigmoid(o) * c / n; past each sequence's length the states are frozen with torch.where on the step's mask; the hidden states are stacked over time, group-normed per head, passed through a gated up-projection (Linear d -> 2 x 64, GELU of one half times the other, Linear 64 -> d) with a residual, a LayerNorm and a linear head; the next-token cross-entropy with ignore_index=-100 on padded targets is computed in forward."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, D, NH, T = 64, 32, 4, 16
DH = D // NH
class SLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(D, 4 * D)
        self.r = nn.Parameter(torch.randn(NH, DH, 4 * DH) * DH ** -0.5)
        self.norm = nn.GroupNorm(NH, D)
    def forward(self, x, mask):
        b, t, _ = x.shape
        pre = self.w(x)  # (b, t, 4D)
        h = x.new_zeros(b, D); c = x.new_zeros(b, D); n = x.new_ones(b, D); m = x.new_zeros(b, D)
        outs = []
        for s in range(t):
            rec = torch.einsum("bhd,hde->bhe", h.view(b, NH, DH), self.r).reshape(b, NH, 4, DH).transpose(1, 2).reshape(b, 4 * D)
            i, f, z, o = (pre[:, s] + rec).chunk(4, dim=-1)
            logf = F.logsigmoid(f)
            m_new = torch.maximum(logf + m, i)
            ig, fg = torch.exp(i - m_new), torch.exp(logf + m - m_new)
            c_new = fg * c + ig * torch.tanh(z)
            n_new = fg * n + ig
            h_new = torch.sigmoid(o) * c_new / n_new
            keep = mask[:, s].unsqueeze(-1)
            h, c, n, m = (torch.where(keep, new, old) for new, old in ((h_new, h), (c_new, c), (n_new, n), (m_new, m)))
            outs.append(h)
        y = torch.stack(outs, 1)
        return self.norm(y.reshape(b * t, D)).view(b, t, D)
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.cell = SLSTM()
        self.up = nn.Linear(D, 128)
        self.down = nn.Linear(64, D)
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)
    def forward(self, ids, mask, targets):
        x = self.emb(ids)
        x[~mask] = 0.0
        y = self.cell(x, mask)
        a, g = self.up(y).chunk(2, dim=-1)
        y = y + self.down(F.gelu(a) * g)
        logits = self.head(self.ln(y))
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-100)
def build_model():
    return LM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    seq = torch.randint(0, V, (b, T + 1), generator=g)
    lens = torch.tensor([16, 11, 13, 8] * ((b + 3) // 4))[:b]
    mask = torch.arange(T)[None, :] < lens[:, None]
    targets = seq[:, 1:].clone()
    targets[~mask] = -100
    return {"ids": seq[:, :-1], "mask": mask, "targets": targets}
