"""Hand-written SqueezeNet-style classifier on 32 x 32 images with 10 classes: a 3x3 stride-1 stem conv with nn.ReLU(inplace=True), a 3x3 stride-2 max-pool with ceil_mode=True (32 -> 16), then fire modules (a 1x1 squeeze conv + in-place ReLU whose output is read twice, by a 1x1 expand conv and a padded 3x3 expand conv, each followed by its own in-place ReLU, the two expansions concatenated along channels), a second ceil_mode max-pool (16 -> 8) between fire modules, a third (8 -> 4), then the classifier: nn.Dropout(p=0.0, inplace=True), a final 1x1 conv to the class count + in-place ReLU, nn.AdaptiveAvgPool2d(1) and a flatten; the model returns the logits and the cross-entropy against int64 labels is in loss_fn."""
import torch
import torch.nn.functional as F
from torch import nn
BATCH_SIZE = 4
NUM_CLASSES = 10


class Fire(nn.Module):
    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.squeeze_act = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand1x1_act = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)
        self.expand3x3_act = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.squeeze_act(self.squeeze(x))
        return torch.cat([self.expand1x1_act(self.expand1x1(x)), self.expand3x3_act(self.expand3x3(x))], 1)


class SqueezeNet(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(32, 8, 32, 32), Fire(64, 8, 32, 32),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 48, 48), Fire(96, 16, 48, 48),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(96, 24, 64, 64), Fire(128, 24, 64, 64),
        )
        self.classifier = nn.Sequential(nn.Dropout(p=0.0, inplace=True), nn.Conv2d(128, num_classes, 1), nn.ReLU(inplace=True),
                                        nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


def build_model():
    return SqueezeNet()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, 32, 32, generator=g), torch.randint(0, NUM_CLASSES, (b,), generator=g)


def loss_fn(output, target):
    return F.cross_entropy(output, target)
