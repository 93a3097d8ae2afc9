"""HF ConvNeXt image classifier: 7x7 depthwise convs, a channels-last LayerNorm between permutes, inverted-bottleneck Linear layers, layer-scale parameters, a downsampling LayerNorm + strided conv between stages."""
import torch
from transformers import ConvNextConfig, ConvNextForImageClassification
BATCH_SIZE = 4
def build_model():
    return ConvNextForImageClassification(ConvNextConfig(num_channels=3, patch_size=4, num_stages=3, hidden_sizes=[16, 32, 64], depths=[1, 1, 2],
                                                         image_size=32, drop_path_rate=0.0, num_labels=5))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 5, (b,), generator=g)}
