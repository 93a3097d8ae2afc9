"""A ResNet-style CNN in plain torch (basic residual blocks with BatchNorm).

Scale (``MEMFLOW_EXAMPLE_SCALE``):

* full (default): 3x224x224 images, 1000 classes, base width 64, depth 50,
  BATCH_SIZE 32 (about 32M parameters: ResNet-50-sized, but built of basic
  blocks rather than bottlenecks).
* tiny: 3x32x32 images, 10 classes, base width 16, depth 10, BATCH_SIZE 4.

``MEMFLOW_RESNET_DEPTH`` overrides the depth: an even number >= 10, counting
the stem convolution, two convolutions per basic block and the classifier
(depth = 2 * blocks + 2). 18 and 34 give the published ResNet-18 / -34
layouts; other depths spread the blocks over the four stages 3:4:6:3.

Batch: ``(images, labels)``; ``loss_fn`` is cross entropy. Each stage is an
``nn.Sequential`` whose blocks after the first are identical modules.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

SCALE = os.environ.get("MEMFLOW_EXAMPLE_SCALE", "full").strip().lower() or "full"
if SCALE not in ("full", "tiny"):
    raise ValueError(f"MEMFLOW_EXAMPLE_SCALE={SCALE!r} is not one of full, tiny")

_FULL = dict(image=224, classes=1000, width=64, depth=50, batch=32)
_TINY = dict(image=32, classes=10, width=16, depth=10, batch=4)
CONFIG = dict(_FULL if SCALE == "full" else _TINY)

_raw_depth = os.environ.get("MEMFLOW_RESNET_DEPTH", "").strip()
if _raw_depth:
    try:
        CONFIG["depth"] = int(_raw_depth)
    except ValueError:
        raise ValueError(f"MEMFLOW_RESNET_DEPTH={_raw_depth!r} is not an integer") from None
if CONFIG["depth"] < 10 or CONFIG["depth"] % 2:
    raise ValueError(
        f"MEMFLOW_RESNET_DEPTH={CONFIG['depth']} must be an even number >= 10 "
        "(depth = 2 * blocks + 2)"
    )

BATCH_SIZE = CONFIG["batch"]
# what `memflow fit --max depth` grows: this file's depth variable, even and at least 10
KNOBS = {"depth": {"env": "MEMFLOW_RESNET_DEPTH", "min": 10, "step": 2}}
_PUBLISHED = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3]}


def stage_blocks(depth: int) -> list[int]:
    """Basic blocks per stage for ``depth`` (= 2 * sum(blocks) + 2)."""
    if depth in _PUBLISHED:
        return list(_PUBLISHED[depth])
    total = (depth - 2) // 2
    weights = [3, 4, 6, 3]
    exact = [total * w / sum(weights) for w in weights]
    blocks = [max(1, int(x)) for x in exact]
    # hand out what is left by the largest remainder (ties: later stages)
    order = sorted(range(4), key=lambda i: (exact[i] - int(exact[i]), i), reverse=True)
    k = 0
    while sum(blocks) < total:
        blocks[order[k % 4]] += 1
        k += 1
    while sum(blocks) > total:  # only with tiny totals and the max(1, .) floor
        i = max(range(4), key=lambda j: blocks[j])
        blocks[i] -= 1
    return blocks


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN + shortcut (1x1 conv + BN when shape changes)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch)
            )
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """Stem, four stages (``nn.ModuleList`` of ``nn.Sequential``), pooling, classifier."""

    def __init__(self, blocks: list[int], width: int, classes: int, small_input: bool):
        super().__init__()
        if small_input:  # CIFAR-style stem for 32x32 images
            self.stem = nn.Sequential(
                nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
            )
        else:  # ImageNet stem: 7x7/2 conv + 3x3/2 max pool
            self.stem = nn.Sequential(
                nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.MaxPool2d(3, 2, 1),
            )
        stages = []
        in_ch = width
        for i, n in enumerate(blocks):
            out_ch = width * 2**i
            stride = 1 if i == 0 else 2
            layers = [BasicBlock(in_ch, out_ch, stride)]
            layers += [BasicBlock(out_ch, out_ch) for _ in range(n - 1)]
            stages.append(nn.Sequential(*layers))
            in_ch = out_ch
        self.stages = nn.ModuleList(stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for stage in self.stages:
            x = stage(x)
        return self.fc(torch.flatten(self.pool(x), 1))


def build_model() -> nn.Module:
    return ResNet(
        stage_blocks(CONFIG["depth"]),
        CONFIG["width"],
        CONFIG["classes"],
        small_input=CONFIG["image"] <= 64,
    )


def example_batch(batch_size: int):
    """``(images, labels)``: seeded random images and class labels."""
    g = torch.Generator(device="cpu").manual_seed(0)
    size = CONFIG["image"]
    images = torch.randn((batch_size, 3, size, size), generator=g, device="cpu")
    labels = torch.randint(0, CONFIG["classes"], (batch_size,), generator=g, device="cpu")
    device = torch.get_default_device()
    return images.to(device), labels.to(device)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)
