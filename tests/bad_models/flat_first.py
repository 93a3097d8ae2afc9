"""Bad (bench/outside6/two_tower.py): its first input is flat ids for EmbeddingBag, not the batch. A two-tower retrieval model with in-batch negatives: the user tower averages a variable-length watch history with nn.EmbeddingBag(mode='mean') over flat ids and per-user offsets and embeds an age bucketed by torch.bucketize against fixed boundaries (a buffer); the item tower embeds item ids and categories; logits = user @ item.T scaled by a learned temperature (exp of a scalar Parameter, clamped)."""
import math
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class TwoTower(nn.Module):
    def __init__(self, n_items=1000, n_cats=20, d=32):
        super().__init__()
        self.history = nn.EmbeddingBag(n_items, d, mode="mean")
        self.register_buffer("age_bounds", torch.tensor([18.0, 25.0, 35.0, 45.0, 55.0, 65.0]))
        self.age = nn.Embedding(7, 8)
        self.user_mlp = nn.Sequential(nn.Linear(d + 8, 64), nn.ReLU(), nn.Linear(64, d))
        self.item = nn.Embedding(n_items, d)
        self.cat = nn.Embedding(n_cats, 8)
        self.item_mlp = nn.Sequential(nn.Linear(d + 8, 64), nn.ReLU(), nn.Linear(64, d))
        self.log_temp = nn.Parameter(torch.tensor(math.log(10.0)))
    def forward(self, hist_ids, hist_offsets, age, item_ids, item_cats):
        u = torch.cat([self.history(hist_ids, hist_offsets), self.age(torch.bucketize(age, self.age_bounds))], -1)
        u = F.normalize(self.user_mlp(u), dim=-1)
        i = F.normalize(self.item_mlp(torch.cat([self.item(item_ids), self.cat(item_cats)], -1)), dim=-1)
        logits = u @ i.t() * self.log_temp.exp().clamp(max=100.0)
        return F.cross_entropy(logits, torch.arange(len(u), device=u.device))
def build_model():
    return TwoTower()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 12, (b,), generator=g)
    return {"hist_ids": torch.randint(0, 1000, (int(lengths.sum()),), generator=g),
            "hist_offsets": torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]]),
            "age": torch.rand(b, generator=g) * 60 + 14, "item_ids": torch.randint(0, 1000, (b,), generator=g),
            "item_cats": torch.randint(0, 20, (b,), generator=g)}
