"""A tiny ConvNeXt (HF): depthwise convolutions, channels-last LayerNorm, layer scale, drop path off."""
import torch
from transformers import ConvNextConfig, ConvNextForImageClassification
BATCH_SIZE = 4
def build_model():
    cfg = ConvNextConfig(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, num_labels=10,
                         image_size=32, patch_size=4)
    return ConvNextForImageClassification(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
