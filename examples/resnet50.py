"""ResNet-50, torchvision's architecture written out (no torchvision import): bottleneck blocks
[3, 4, 6, 3], in-place ReLU, 25.6 M parameters at 1000 classes; image classification.

full: 224 × 224 images, 1000 classes, BATCH_SIZE 32 (what TFLMS and Meng et al. train).
tiny: 64 × 64 images, 10 classes, widths / 16, BATCH_SIZE 4.
``MEMFLOW_RESNET50_IMAGE`` overrides the image size (e.g. for ``memflow fit``).
Batch: ``(images, labels)``; ``loss_fn`` is cross-entropy.
"""
import os

import torch
from torch import nn

SCALE = os.environ.get("MEMFLOW_EXAMPLE_SCALE", "full").strip().lower() or "full"
if SCALE not in ("full", "tiny"):
    raise ValueError(f"MEMFLOW_EXAMPLE_SCALE={SCALE!r} is not one of full, tiny")
CONFIG = dict(image=224, classes=1000, width=64, batch=32) if SCALE == "full" else \
    dict(image=64, classes=10, width=4, batch=4)
if os.environ.get("MEMFLOW_RESNET50_IMAGE", "").strip():
    CONFIG["image"] = int(os.environ["MEMFLOW_RESNET50_IMAGE"])
BATCH_SIZE = CONFIG["batch"]
KNOBS = {"seq": {"env": "MEMFLOW_RESNET50_IMAGE", "min": 32, "step": 32}}  # the image side, for `memflow fit`


def conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False)


class Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck: the stride on the 3×3 convolution."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000, width: int = 64, layers=(3, 4, 6, 3)):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._layer(width, layers[0])
        self.layer2 = self._layer(width * 2, layers[1], stride=2)
        self.layer3 = self._layer(width * 4, layers[2], stride=2)
        self.layer4 = self._layer(width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * Bottleneck.expansion, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * Bottleneck.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * Bottleneck.expansion, stride),
                                       nn.BatchNorm2d(planes * Bottleneck.expansion))
        layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * Bottleneck.expansion
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_model() -> nn.Module:
    return ResNet50(CONFIG["classes"], CONFIG["width"])


def example_batch(batch_size: int):
    s = CONFIG["image"]
    return torch.randn(batch_size, 3, s, s), torch.randint(0, CONFIG["classes"], (batch_size,))


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(output, target)
