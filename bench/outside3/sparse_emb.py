"""A word-bag classifier whose embedding has sparse gradients (Embedding(sparse=True)) and an optimizer that takes them (SGD with momentum)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5000, 32, sparse=True)
        self.mlp = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 5))
    def forward(self, ids):
        return self.mlp(self.emb(ids).mean(1))
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 5000, (b, 12), generator=g), torch.randint(0, 5, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
def optimizer(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)
