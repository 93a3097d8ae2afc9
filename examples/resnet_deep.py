"""TensorFlowMem's deep ResNet (Wei et al.): torchvision's bottleneck ResNet with only the third
stage grown (as SuperNeurons does), image classification; the depth counts the layers.

Layers = 3 × (3 + 4 + n + 3) + 2 for n third-stage blocks: 50 is ResNet-50 (n = 6), 101 is
ResNet-101 (n = 23); ResNet-152 grows the second stage too, so it is not on this line. ``MEMFLOW_DEEP_RESNET_LAYERS`` sets it
(50, 53, 56, ...: one block is 3 layers); ``memflow fit --max depth`` grows it (``KNOBS``).
At 1000 classes a 503-layer network (n = 157) has 194 M parameters and 1916 layers 720 M
(TensorFlowMem's Table 2 reports 172 M at 504 layers and 697 M at 1916: their exact
layout is not published in the text; each third-stage block adds 1.1 M either way).

full: 224 × 224 images, 1000 classes, BATCH_SIZE 16 (TensorFlowMem's mini-batch), 50 layers.
tiny: 64 × 64 images, 10 classes, widths / 16, BATCH_SIZE 4, 50 layers.
``MEMFLOW_DEEP_RESNET_GROUP`` (default 1) puts that many consecutive third-stage blocks in one
``Sequential`` (the same network and parameters, in a different module tree), so a planner's
nodes, which are the repeated blocks, are groups of blocks: fewer nodes for a deep network.
Batch: ``(images, labels)``; ``loss_fn`` is cross-entropy. The blocks come from
``examples/resnet50.py`` (imported by path: model files are not a package).
"""
import importlib.util
import os
from pathlib import Path

import torch


def _load_resnet50():
    path = Path(__file__).resolve().with_name("resnet50.py")
    spec = importlib.util.spec_from_file_location("memflow_examples_resnet50", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_r50 = _load_resnet50()
SCALE = _r50.SCALE
CONFIG = dict(image=224, classes=1000, width=64, batch=16) if SCALE == "full" else \
    dict(image=64, classes=10, width=4, batch=4)
_raw = os.environ.get("MEMFLOW_DEEP_RESNET_LAYERS", "").strip() or "50"
try:
    CONFIG["layers"] = int(_raw)
except ValueError:
    raise ValueError(f"MEMFLOW_DEEP_RESNET_LAYERS={_raw!r} is not an integer") from None
if CONFIG["layers"] < 35 or (CONFIG["layers"] - 32) % 3:
    raise ValueError(f"MEMFLOW_DEEP_RESNET_LAYERS={CONFIG['layers']} must be 35, 38, 41, ... (3 × blocks + 2)")
CONFIG["stage3"] = (CONFIG["layers"] - 32) // 3
_raw = os.environ.get("MEMFLOW_DEEP_RESNET_GROUP", "").strip() or "1"
try:
    CONFIG["group"] = int(_raw)
except ValueError:
    raise ValueError(f"MEMFLOW_DEEP_RESNET_GROUP={_raw!r} is not an integer") from None
if CONFIG["group"] < 1:
    raise ValueError(f"MEMFLOW_DEEP_RESNET_GROUP={CONFIG['group']} must be >= 1")
BATCH_SIZE = CONFIG["batch"]
KNOBS = {"depth": {"env": "MEMFLOW_DEEP_RESNET_LAYERS", "min": 35, "step": 3}}


class Group(torch.nn.Sequential):
    """Consecutive identical third-stage blocks kept together: one node for a planner."""


def build_model() -> torch.nn.Module:
    model = _r50.ResNet50(CONFIG["classes"], CONFIG["width"], layers=(3, 4, CONFIG["stage3"], 3))
    g = CONFIG["group"]
    if g > 1:  # the stage's first block (it changes the shape), then groups of g blocks (the last may be shorter)
        blocks = list(model.layer3)
        model.layer3 = torch.nn.Sequential(blocks[0], *(Group(*blocks[i:i + g]) for i in range(1, len(blocks), g)))
    return model


def example_batch(batch_size: int):
    s = CONFIG["image"]
    return torch.randn(batch_size, 3, s, s), torch.randint(0, CONFIG["classes"], (batch_size,))


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(output, target)
