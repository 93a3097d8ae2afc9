"""A 3D U-Net for volumetric segmentation (Çiçek et al., 2016; TFLMS's "3DUnet" row).

Four resolution levels (three 2× max-poolings), each two 3×3×3 convolutions with BatchNorm and
ReLU; the base width doubles per level (32, 64, 128, 256, with a 512-wide bottom as in Çiçek
et al.); transposed-convolution upsampling and skip connections by concatenation; a 1×1×1
convolution to the classes; voxel-wise cross-entropy.

full: 4 input channels (BraTS's four MRI modalities), 4 classes, 128³ volumes, BATCH_SIZE 1
(19 M parameters). ``MEMFLOW_UNET3D_IMAGE`` sets the volume's side (a multiple of 16:
``KNOBS``' ``seq``, so ``memflow fit --max seq`` grows the image; TFLMS trained 192³).
tiny: 1 channel, 2 classes, widths 4, 16³ volumes, BATCH_SIZE 2.
Batch: ``(volumes, labels)``; ``loss_fn`` is cross-entropy over the voxels.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

SCALE = os.environ.get("MEMFLOW_EXAMPLE_SCALE", "full").strip().lower() or "full"
if SCALE not in ("full", "tiny"):
    raise ValueError(f"MEMFLOW_EXAMPLE_SCALE={SCALE!r} is not one of full, tiny")
CONFIG = dict(channels=4, classes=4, width=32, image=128, batch=1) if SCALE == "full" else \
    dict(channels=1, classes=2, width=4, image=16, batch=2)
_raw = os.environ.get("MEMFLOW_UNET3D_IMAGE", "").strip()
if _raw:
    try:
        CONFIG["image"] = int(_raw)
    except ValueError:
        raise ValueError(f"MEMFLOW_UNET3D_IMAGE={_raw!r} is not an integer") from None
if CONFIG["image"] < 16 or CONFIG["image"] % 16:
    raise ValueError(f"MEMFLOW_UNET3D_IMAGE={CONFIG['image']} must be a positive multiple of 16")
BATCH_SIZE = CONFIG["batch"]
KNOBS = {"seq": {"env": "MEMFLOW_UNET3D_IMAGE", "min": 16, "step": 16}}


class DoubleConv(nn.Module):
    def __init__(self, cin: int, cmid: int, cout: int):
        super().__init__()
        self.c1 = nn.Conv3d(cin, cmid, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm3d(cmid)
        self.c2 = nn.Conv3d(cmid, cout, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm3d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class Up(nn.Module):
    """Upsample ``x`` 2×, concatenate the skip, two convolutions."""

    def __init__(self, cin: int, cskip: int, cout: int):
        super().__init__()
        self.up = nn.ConvTranspose3d(cin, cin, 2, stride=2)
        self.conv = DoubleConv(cin + cskip, cout, cout)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.cat([self.up(x), skip], dim=1))


class UNet3D(nn.Module):
    def __init__(self, channels: int, classes: int, width: int):
        super().__init__()
        w = width
        # Çiçek et al.: 32→64, 64→128, 128→256, 256→512 on the way down
        self.down = nn.ModuleList([DoubleConv(channels, w, 2 * w), DoubleConv(2 * w, 2 * w, 4 * w),
                                   DoubleConv(4 * w, 4 * w, 8 * w)])
        self.bottom = DoubleConv(8 * w, 8 * w, 16 * w)
        self.up = nn.ModuleList([Up(16 * w, 8 * w, 8 * w), Up(8 * w, 4 * w, 4 * w), Up(4 * w, 2 * w, 2 * w)])
        self.head = nn.Conv3d(2 * w, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.max_pool3d(x, 2)
        x = self.bottom(x)
        for block, skip in zip(self.up, reversed(skips)):
            x = block(x, skip)
        return self.head(x)


def build_model() -> nn.Module:
    return UNet3D(CONFIG["channels"], CONFIG["classes"], CONFIG["width"])


def example_batch(batch_size: int):
    s = CONFIG["image"]
    return (torch.randn(batch_size, CONFIG["channels"], s, s, s),
            torch.randint(0, CONFIG["classes"], (batch_size, s, s, s)))


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)
