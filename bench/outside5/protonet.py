"""A prototypical network (few-shot episodes): one conv encoder over support and query images, class prototypes as the mean of each class's support embeddings (a reshape + mean), logits = -torch.cdist(query, prototypes)^2."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4  # episodes
WAY, SHOT, QUERY = 5, 3, 4
def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))
class ProtoNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(block(1, 32), block(32, 32), block(32, 32), nn.Flatten())
    def forward(self, support, query, query_labels):
        e, n, c, h, w = support.shape  # episodes, way*shot
        s = self.enc(support.reshape(-1, c, h, w)).view(e, WAY, SHOT, -1)
        q = self.enc(query.reshape(-1, c, h, w)).view(e, WAY * QUERY, -1)
        protos = s.mean(2)  # e, way, d
        logits = -torch.cdist(q, protos) ** 2
        return F.cross_entropy(logits.reshape(-1, WAY), query_labels.reshape(-1))
def build_model():
    return ProtoNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(b, WAY, 1, 1, 16, 16, generator=g)
    support = (centers + 3 * torch.randn(b, WAY, SHOT, 1, 16, 16, generator=g)).reshape(b, WAY * SHOT, 1, 16, 16)
    query = (centers + 3 * torch.randn(b, WAY, QUERY, 1, 16, 16, generator=g)).reshape(b, WAY * QUERY, 1, 16, 16)
    labels = torch.arange(WAY).repeat_interleave(QUERY).expand(b, -1).contiguous()
    return {"support": support, "query": query, "query_labels": labels}
