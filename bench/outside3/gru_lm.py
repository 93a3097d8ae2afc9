"""A word-level GRU language model in the PyTorch examples' style: Embedding -> dropout -> 2-layer GRU (batch_first) -> Linear tied to the embedding weights (decoder.weight = encoder.weight), hidden state initialised with zeros each step."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class RNNModel(nn.Module):
    def __init__(self, ntoken=200, ninp=32, nhid=32, nlayers=2, dropout=0.0):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.GRU(ninp, nhid, nlayers, dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight
        self.nlayers, self.nhid = nlayers, nhid
    def forward(self, input, target):
        hidden = torch.zeros(self.nlayers, input.size(0), self.nhid, device=input.device)
        output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
        decoded = self.decoder(self.drop(output))
        return F.cross_entropy(decoded.view(-1, decoded.size(-1)), target.reshape(-1))
def build_model():
    return RNNModel()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    d = torch.randint(0, 200, (b, 21), generator=g)
    return {"input": d[:, :-1].contiguous(), "target": d[:, 1:].contiguous()}
