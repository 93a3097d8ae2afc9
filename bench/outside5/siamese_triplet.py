"""A Siamese embedding net trained with a triplet loss: one encoder module applied to anchor, positive and negative in three separate calls, L2-normalised embeddings, nn.TripletMarginLoss."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Siamese(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                                 nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 64))
        self.loss = nn.TripletMarginLoss(margin=1.0)
    def embed(self, x):
        return F.normalize(self.enc(x), dim=1)
    def forward(self, anchor, positive, negative):
        return self.loss(self.embed(anchor), self.embed(positive), self.embed(negative))
def build_model():
    return Siamese()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(b, 1, 28, 28, generator=g)
    return {"anchor": a, "positive": a + 0.7 * torch.randn(b, 1, 28, 28, generator=g), "negative": 0.7 * a + 0.7 * torch.randn(b, 1, 28, 28, generator=g)}
