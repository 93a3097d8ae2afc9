"""A multi-scale segmentation net with one shared encoder: the same small CNN runs on the image at 32 px, at 16 px (F.interpolate) and at 8 px (avg_pool2d), its three feature maps are upsampled back to 32 px with F.interpolate(mode="bilinear", align_corners=False) and summed, and a 1x1 conv head labels every pixel (cross-entropy over 5 classes); the encoder's weights are used three times in one step."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
class MultiScaleSeg(nn.Module):
    def __init__(self, c=32, n_cls=5):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, c, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(c, c, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(c, n_cls, 1)
    def forward(self, img, mask):
        size = img.shape[-2:]
        inputs = [img, F.interpolate(img, scale_factor=0.5, mode="bilinear", align_corners=False), F.avg_pool2d(img, 4)]
        feats = 0
        for x in inputs:
            f = self.encoder(x)
            if f.shape[-2:] != size:
                f = F.interpolate(f, size=size, mode="bilinear", align_corners=False)
            feats = feats + f
        return F.cross_entropy(self.head(feats), mask)
def build_model():
    return MultiScaleSeg()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"img": torch.randn(b, 3, 32, 32, generator=g), "mask": torch.randint(0, 5, (b, 32, 32), generator=g)}
