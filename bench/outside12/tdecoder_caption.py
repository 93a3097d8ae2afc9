"""An image captioner with torch's own nn.TransformerDecoder: a small convolutional encoder on 32 x 32 images (two stride-2 3x3 convs 3 -> 32 -> 32, each followed by GroupNorm(4, 32) and GELU) whose 8 x 8 map is flattened into 64 memory tokens (flatten(2).transpose(1, 2)) plus learned position embeddings; captions of 12 tokens (vocab 80, pad id 0, the rows padded from positions 9, 12, 7 and 12) are embedded with learned positions and decoded by nn.TransformerDecoder of 2 nn.TransformerDecoderLayer (d 32, 4 heads, feed-forward 64, dropout 0.1 left on, GELU, batch_first, norm_first=True) with a final LayerNorm, under a boolean causal tgt_mask (torch.triu of ones above the diagonal) with tgt_is_causal=True and a tgt_key_padding_mask for the padded tokens, cross-attending to the image memory; a linear head to the vocabulary and the next-token cross-entropy with ignore_index=-100 on the padded targets, computed in forward."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, D, T = 80, 32, 12
class Captioner(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, D, 3, 2, 1), nn.GroupNorm(4, D), nn.GELU(), nn.Conv2d(D, D, 3, 2, 1), nn.GroupNorm(4, D), nn.GELU())
        self.mem_pos = nn.Parameter(torch.randn(1, 64, D) * 0.02)
        self.tok = nn.Embedding(V, D, padding_idx=0)
        self.pos = nn.Embedding(T, D)
        layer = nn.TransformerDecoderLayer(D, 4, 64, dropout=0.1, activation="gelu", batch_first=True, norm_first=True)
        self.dec = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(D))
        self.head = nn.Linear(D, V)
    def forward(self, images, tokens, targets):
        mem = self.enc(images).flatten(2).transpose(1, 2) + self.mem_pos
        t = tokens.shape[1]
        x = self.tok(tokens) + self.pos(torch.arange(t, device=tokens.device))
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=tokens.device), 1)
        h = self.dec(x, mem, tgt_mask=causal, tgt_is_causal=True, tgt_key_padding_mask=tokens == 0)
        logits = self.head(h)
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-100)
def build_model():
    return Captioner()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    seq = torch.randint(1, V, (b, T + 1), generator=g)
    lens = torch.tensor([9, 12, 7, 12] * ((b + 3) // 4))[:b]
    valid = torch.arange(T + 1)[None, :] < (lens[:, None] + 1)
    seq[~valid] = 0
    tokens, targets = seq[:, :-1].clone(), seq[:, 1:].clone()
    tokens[:, 0] = 1
    targets[targets == 0] = -100
    return {"images": torch.randn(b, 3, 32, 32, generator=g), "tokens": tokens, "targets": targets}
