"""A hand-written recommender: a user-id nn.Embedding with max_norm=1.0 (every forward renormalises the looked-up rows of its weight IN PLACE, under no_grad, before the lookup: a parameter mutated by the forward pass), an item-history nn.EmbeddingBag(mode="mean") over flat indices cut into bags by an offsets tensor (each sample 3 bags of 5 items, offsets = arange * 5, so the bag count scales with the batch and the indices are batch-major flat; forward rebases the offsets to start at 0, as EmbeddingBag requires, so any slice of the batch along dimension 0 is itself a valid batch), a BatchNorm1d(momentum=None) over dense features keeping a cumulative moving average (its num_batches_tracked buffer sets the averaging factor), an MLP over the concatenation of user, the three bag means and the normalised dense features, and a BCE-with-logits loss against a click target in loss_fn."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
USERS, ITEMS, DENSE, BAGS, BAG_LEN, D = 200, 500, 8, 3, 5, 16
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.Embedding(USERS, D, max_norm=1.0)
        self.items = nn.EmbeddingBag(ITEMS, D, mode="mean")
        self.bn = nn.BatchNorm1d(DENSE, momentum=None)
        self.mlp = nn.Sequential(nn.Linear(D + BAGS * D + DENSE, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
    def forward(self, user_ids, item_ids, offsets, dense):
        b = user_ids.shape[0]
        u = self.user(user_ids)
        offsets = offsets.flatten()
        bags = self.items(item_ids.flatten(), offsets - offsets[:1]).view(b, BAGS * D)
        return self.mlp(torch.cat([u, bags, self.bn(dense)], 1)).squeeze(1)
def build_model():
    return Model()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    offsets = (torch.arange(b * BAGS) * BAG_LEN).view(b, BAGS)
    return ({"user_ids": torch.randint(0, USERS, (b,), generator=g), "item_ids": torch.randint(0, ITEMS, (b, BAGS * BAG_LEN), generator=g),
             "offsets": offsets, "dense": torch.randn(b, DENSE, generator=g)}, torch.randint(0, 2, (b,), generator=g).float())
def loss_fn(out, target):
    return F.binary_cross_entropy_with_logits(out, target)
