"""A multi-task model: shared trunk (Conv + GroupNorm + SiLU), a classification head and a regression head, returning a dict {"loss", "logits", "pred"}; the loss is a weighted sum of cross-entropy with label smoothing and a smooth-L1 term."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(3, 24, 3, 1, 1), nn.GroupNorm(4, 24), nn.SiLU(inplace=True),
                                   nn.Conv2d(24, 48, 3, 2, 1), nn.GroupNorm(4, 48), nn.SiLU(inplace=True),
                                   nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.cls = nn.Linear(192, 7)
        self.reg = nn.Sequential(nn.Linear(192, 32), nn.Tanh(), nn.Linear(32, 4))
    def forward(self, image, label, box):
        f = self.trunk(image)
        logits, pred = self.cls(f), self.reg(f)
        loss = F.cross_entropy(logits, label, label_smoothing=0.1) + 0.5 * F.smooth_l1_loss(pred, box)
        return {"loss": loss, "logits": logits, "pred": pred}
def build_model():
    return Net()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"image": torch.randn(b, 3, 16, 16, generator=g), "label": torch.randint(0, 7, (b,), generator=g),
            "box": torch.rand(b, 4, generator=g)}
