"""A hand-written RNN-Transducer's training graph without the transducer loss's dynamic programme: an audio encoder (two stacked LSTM layers over 24 frames of 20 mel features, the second on frames subsampled by 2 through a strided 1-D conv), a prediction network (an embedding of the previous label with a blank-start token, a one-layer LSTM over 8 labels), the joint network broadcasting the encoder (B, T, 1, H) and prediction (B, 1, U+1, H) projections into a (B, T, U+1, H) sum, tanh, and a linear to 12 output classes (the largest tensor: B x 12 x 9 x 12); the loss is the cross-entropy of each (t, u) cell against the label at u (the blank where u is past the labels), a stand-in for the RNN-T loss that reads the same joint tensor."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, H = 12, 32
class RNNT(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = nn.LSTM(20, H, batch_first=True)
        self.sub = nn.Conv1d(H, H, 3, stride=2, padding=1)
        self.enc2 = nn.LSTM(H, H, batch_first=True)
        self.emb = nn.Embedding(V + 1, H)
        self.pred = nn.LSTM(H, H, batch_first=True)
        self.enc_proj, self.pred_proj = nn.Linear(H, H), nn.Linear(H, H, bias=False)
        self.out = nn.Linear(H, V)
    def forward(self, feats, labels):
        e, _ = self.enc1(feats)
        e = self.sub(e.transpose(1, 2)).transpose(1, 2)
        e, _ = self.enc2(F.relu(e))
        start = torch.full_like(labels[:, :1], V)
        p, _ = self.pred(self.emb(torch.cat([start, labels], 1)))
        joint = torch.tanh(self.enc_proj(e).unsqueeze(2) + self.pred_proj(p).unsqueeze(1))
        logits = self.out(joint)  # B, T', U+1, V
        target = F.pad(labels, (0, 1), value=0).unsqueeze(1).expand(-1, logits.shape[1], -1)
        return F.cross_entropy(logits.reshape(-1, V), target.reshape(-1))
def build_model():
    return RNNT()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"feats": torch.randn(b, 24, 20, generator=g), "labels": torch.randint(1, V, (b, 8), generator=g)}
