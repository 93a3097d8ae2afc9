"""A speech recogniser trained with CTC: a strided conv front end, a bidirectional LSTM, log_softmax over characters and F.ctc_loss with per-sample input and target lengths."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class ASR(nn.Module):
    def __init__(self, feats=20, hid=32, vocab=12):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(feats, hid, 5, 2, 2), nn.GELU(), nn.Conv1d(hid, hid, 3, 1, 1), nn.GELU())
        self.rnn = nn.LSTM(hid, hid, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hid, vocab)
    def forward(self, audio, targets, target_lengths):
        h = self.conv(audio.transpose(1, 2)).transpose(1, 2)
        h, _ = self.rnn(h)
        logp = self.head(h).log_softmax(-1).transpose(0, 1)
        in_len = torch.full((audio.shape[0],), logp.shape[0], dtype=torch.long)
        return F.ctc_loss(logp, targets, in_len, target_lengths, zero_infinity=True)
def build_model():
    return ASR()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"audio": torch.randn(b, 40, 20, generator=g), "targets": torch.randint(1, 12, (b, 6), generator=g),
            "target_lengths": torch.full((b,), 6, dtype=torch.long)}
