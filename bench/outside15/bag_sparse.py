"""A hand-written click-through model over sparse features: each sample carries 12 feature ids split into 3 bags of unequal sizes (bag boundaries drawn per sample in example_batch and passed as a (b, 3) tensor of offsets local to the sample's own 12 ids, so micro-batches split cleanly), per-id weights (b, 12) and a padded history of 6 item ids (pad id 0); forward flattens the ids and weights and turns the local offsets into global ones (local + 12 x row index), runs one nn.EmbeddingBag(500, 16, mode="sum") with those offsets and per_sample_weights (a weighted sum per bag, 3 bags per sample concatenated to 48), embeds the history with a second nn.Embedding(200, 16, padding_idx=0) (the pad row zero and never updated) and mean-pools it over the non-pad positions (mask-weighted sum over count), concatenates both (64) and applies a 64 -> 64 -> 32 -> 1 ReLU MLP with dropout 0.1 after the first layer (random draws in forward); binary cross-entropy with logits against 0/1 click labels in loss_fn. No batch norm, no buffers."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
L, BAGS, H = 12, 3, 6
class BagNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(500, 16, mode="sum")
        self.hist = nn.Embedding(200, 16, padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(BAGS * 16 + 16, 64), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
    def forward(self, ids, offsets, weights, history):
        b = ids.shape[0]
        glob = (offsets + L * torch.arange(b, device=ids.device).unsqueeze(1)).reshape(-1)
        bags = self.bag(ids.reshape(-1), glob, per_sample_weights=weights.reshape(-1)).view(b, BAGS * 16)
        mask = (history != 0).unsqueeze(-1).to(bags.dtype)
        hist = (self.hist(history) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.mlp(torch.cat([bags, hist], 1)).squeeze(-1)
def build_model():
    return BagNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 500, (b, L), generator=g)
    cuts = torch.stack([torch.randperm(L - 1, generator=g)[:BAGS - 1].sort().values + 1 for _ in range(b)])
    offsets = torch.cat([torch.zeros(b, 1, dtype=torch.long), cuts], 1)
    weights = torch.rand(b, L, generator=g)
    history = torch.randint(1, 200, (b, H), generator=g)
    history[1::2, H - 2:] = 0
    return (ids, offsets, weights, history), torch.randint(0, 2, (b,), generator=g).float()
def loss_fn(out, y):
    return F.binary_cross_entropy_with_logits(out, y)
