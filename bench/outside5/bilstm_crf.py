"""A BiLSTM-CRF tagger: a bidirectional LSTM's emissions, a learned transition matrix, the CRF's partition function by the forward algorithm (logsumexp stepped over time in a Python loop, masked by each sentence's length) and the gold path's score gathered from emissions and transitions."""
import torch, torch.nn as nn
BATCH_SIZE = 4
T, TAGS = 12, 5
class BiLSTMCRF(nn.Module):
    def __init__(self, vocab=100, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d // 2, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(d, TAGS)
        self.trans = nn.Parameter(torch.randn(TAGS, TAGS) * 0.1)
        self.start = nn.Parameter(torch.zeros(TAGS))
        self.end = nn.Parameter(torch.zeros(TAGS))
    def forward(self, tokens, tags, mask):
        em = self.proj(self.lstm(self.emb(tokens))[0])  # b, t, tags
        m = mask.float()
        # partition function
        alpha = self.start + em[:, 0]
        for t in range(1, tokens.shape[1]):
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.trans + em[:, t].unsqueeze(1), dim=1)
            alpha = m[:, t:t + 1] * nxt + (1 - m[:, t:t + 1]) * alpha
        log_z = torch.logsumexp(alpha + self.end, 1)
        # gold path
        score = self.start[tags[:, 0]] + em[:, 0].gather(1, tags[:, :1]).squeeze(1)
        for t in range(1, tokens.shape[1]):
            step = self.trans[tags[:, t - 1], tags[:, t]] + em[:, t].gather(1, tags[:, t:t + 1]).squeeze(1)
            score = score + step * m[:, t]
        last = tags.gather(1, (mask.sum(1, keepdim=True) - 1)).squeeze(1)
        score = score + self.end[last]
        return (log_z - score).mean()
def build_model():
    return BiLSTMCRF()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(6, T + 1, (b,), generator=g)
    lengths[0] = T
    mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)
    return {"tokens": torch.randint(0, 100, (b, T), generator=g), "tags": torch.randint(0, TAGS, (b, T), generator=g), "mask": mask}
