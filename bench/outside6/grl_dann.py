"""Domain-adversarial training (DANN): a shared feature extractor over source and target batches, a label classifier on the source features, and a domain classifier behind a gradient-reversal layer (a custom autograd.Function whose forward returns x.view_as(x) and whose backward returns -alpha * grad)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)
    @staticmethod
    def backward(ctx, grad):
        return -ctx.alpha * grad, None
class DANN(nn.Module):
    def __init__(self, alpha=0.3):
        super().__init__()
        self.alpha = alpha
        self.features = nn.Sequential(nn.Conv2d(3, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 5), nn.ReLU(),
                                      nn.MaxPool2d(2), nn.Flatten())
        self.classifier = nn.Sequential(nn.Linear(32 * 4 * 4, 100), nn.ReLU(), nn.Linear(100, 10))
        self.domain = nn.Sequential(nn.Linear(32 * 4 * 4, 100), nn.ReLU(), nn.Linear(100, 1))
    def forward(self, src, src_labels, tgt):
        f_src, f_tgt = self.features(src), self.features(tgt)
        cls_loss = F.cross_entropy(self.classifier(f_src), src_labels)
        f = GradReverse.apply(torch.cat([f_src, f_tgt]), self.alpha)
        dom = torch.cat([torch.zeros(len(f_src), 1, device=f.device), torch.ones(len(f_tgt), 1, device=f.device)])
        return cls_loss + F.binary_cross_entropy_with_logits(self.domain(f), dom)
def build_model():
    return DANN()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"src": torch.randn(b, 3, 28, 28, generator=g), "src_labels": torch.randint(0, 10, (b,), generator=g),
            "tgt": torch.randn(b, 3, 28, 28, generator=g) * 0.5 + 0.3}
