"""A small segmentation net whose loss reads per-pixel int64 labels at full resolution: coarse logits
bilinearly upsampled to the label map inside the loss, cross-entropy with an ignore index. The NLL's backward
lets the labels go before the log-softmax backward makes its gradient, that phase's peak."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH_SIZE = 4


class Head(nn.Module):
    def __init__(self, c=16, k=5):
        super().__init__()
        self.cls = nn.Conv2d(c, k, 1)

    def forward(self, h, labels):
        logits = F.interpolate(self.cls(h), size=labels.shape[-2:], mode="bilinear", align_corners=False)
        return F.cross_entropy(logits, labels, ignore_index=255)


class Seg(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, stride=2, padding=1), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(c, c, 3, stride=2, padding=1), nn.ReLU())
        self.mid = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU())
        self.head = Head(c)

    def forward(self, x, labels):
        return self.head(self.mid(self.down(self.stem(x))), labels)


def build_model():
    torch.manual_seed(0)
    return Seg()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 5, (b, 64, 64), generator=g)
    labels[:, :4] = 255
    return {"x": torch.randn(b, 3, 32, 32, generator=g), "labels": labels}
