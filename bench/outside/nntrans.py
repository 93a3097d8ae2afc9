"""torch's own nn.Transformer (encoder-decoder, nn.MultiheadAttention), returning (loss, logits)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        self.tr = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64,
                                 dropout=0.0, batch_first=True, norm_first=True)
        self.out = nn.Linear(32, 64)
    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        h = self.tr(self.emb(src), self.emb(tgt), tgt_mask=mask, tgt_is_causal=True)
        logits = self.out(h)
        return F.cross_entropy(logits.flatten(0, 1), tgt.flatten()), logits
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"src": torch.randint(0, 64, (b, 10), generator=g), "tgt": torch.randint(0, 64, (b, 8), generator=g)}
