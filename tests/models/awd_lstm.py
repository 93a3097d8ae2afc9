"""(A copy of bench/outside11/awd_lstm.py, for tests/test_tied_grads.py.) A hand-written AWD-LSTM language model (Merity et al.) on one truncated-BPTT segment: a token embedding with embedding dropout (whole rows of the weight zeroed by a Bernoulli mask drawn in forward and rescaled, then F.embedding with the masked weight), locked (variational) dropout masks drawn once per sequence and broadcast over time on the embedding output and between layers, two single-layer nn.LSTM modules (32 -> 48 and 48 -> 32, batch_first) whose hidden-to-hidden matrix gets DropConnect: each forward draws a fresh dropout of the module's own weight_hh_l0 parameter and runs the LSTM through torch.func.functional_call with that dropped weight swapped in (the other weights the module's own); the segment's initial (h, c) states come in as inputs (the detached states carried over from the previous segment, given batch-first as (b, 1, H) per layer and transposed to the LSTM's (1, b, H) inside), the decoder is tied to the embedding (F.linear with the embedding weight), and the next-token cross-entropy over the segment's targets is computed inside forward (the model returns the scalar loss)."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.func import functional_call
BATCH_SIZE = 4
V, E, H, T = 200, 32, 48, 20
P_EMB, P_LOCK, P_WEIGHT = 0.1, 0.2, 0.3
def locked_dropout(x, p, training):
    if not training or p == 0:
        return x
    mask = x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1 - p) / (1 - p)
    return x * mask
class AWDLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, E)
        self.rnn1 = nn.LSTM(E, H, batch_first=True)
        self.rnn2 = nn.LSTM(H, E, batch_first=True)
    def weight_dropped(self, rnn, x, state):
        w = F.dropout(rnn.weight_hh_l0, P_WEIGHT, self.training)
        return functional_call(rnn, {"weight_hh_l0": w}, (x, state))
    def forward(self, input_ids, targets, h1, c1, h2, c2):
        w = self.emb.weight
        if self.training:
            w = w * (w.new_empty(V, 1).bernoulli_(1 - P_EMB) / (1 - P_EMB))
        x = locked_dropout(F.embedding(input_ids, w), P_LOCK, self.training)
        s1 = (h1.transpose(0, 1).contiguous(), c1.transpose(0, 1).contiguous())
        s2 = (h2.transpose(0, 1).contiguous(), c2.transpose(0, 1).contiguous())
        x, _ = self.weight_dropped(self.rnn1, x, s1)
        x = locked_dropout(x, P_LOCK, self.training)
        x, _ = self.weight_dropped(self.rnn2, x, s2)
        x = locked_dropout(x, P_LOCK, self.training)
        logits = F.linear(x, self.emb.weight)
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
def build_model():
    return AWDLSTM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    seq = torch.randint(0, V, (b, T + 1), generator=g)
    return {"input_ids": seq[:, :-1].contiguous(), "targets": seq[:, 1:].contiguous(),
            "h1": 0.1 * torch.randn(b, 1, H, generator=g), "c1": 0.1 * torch.randn(b, 1, H, generator=g),
            "h2": 0.1 * torch.randn(b, 1, E, generator=g), "c2": 0.1 * torch.randn(b, 1, E, generator=g)}
