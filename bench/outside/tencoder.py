"""torch's nn.TransformerEncoder (batch_first, norm_first, GELU) for token classification, with a key padding mask."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Tagger(nn.Module):
    def __init__(self, v=300, d=64, tags=9):
        super().__init__()
        self.emb = nn.Embedding(v, d, padding_idx=0)
        layer = nn.TransformerEncoderLayer(d, 4, 128, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)
        self.cls = nn.Linear(d, tags)
    def forward(self, tokens, tags):
        pad = tokens == 0
        h = self.enc(self.emb(tokens), src_key_padding_mask=pad)
        return F.cross_entropy(self.cls(h).flatten(0, 1), tags.flatten(), ignore_index=-100)
def build_model():
    return Tagger()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    tok = torch.randint(1, 300, (b, 24), generator=g)
    tok[:, 20:] = 0
    tags = torch.randint(0, 9, (b, 24), generator=g)
    tags[tok == 0] = -100
    return {"tokens": tok, "tags": tags}
