"""A BERT-style masked-token model written by hand (nn.TransformerEncoderLayer) whose loss reads only the masked positions by boolean indexing, hidden[mask] with the batch's boolean mask (a shape set by the mask's values), and fills the inputs with torch.where."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, T, MASK_ID = 200, 24, 1
class MLM(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.pos = nn.Parameter(torch.randn(T, d) * 0.02)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4, 128, dropout=0.0, batch_first=True), 2)
        self.head = nn.Linear(d, V)
    def forward(self, ids, mask):
        inp = torch.where(mask, torch.full_like(ids, MASK_ID), ids)
        h = self.enc(self.emb(inp) + self.pos)
        return F.cross_entropy(self.head(h[mask]), ids[mask])
def build_model():
    return MLM()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    mask = torch.rand(b, T, generator=g) < 0.15
    mask[:, 0] = True
    return {"ids": torch.randint(2, V, (b, T), generator=g), "mask": mask}
