"""HF ConvNeXt V2 for image classification from a tiny config on 32 x 32 images: a 2x2 stride-2 patchify stem to 16 channels + channels-first LayerNorm, three stages of depths 2, 2, 2 and widths 16, 32, 48 (strided 2x2 downsampling convs behind channels-first LayerNorms between them), each block a depthwise 7x7 conv, a permute to channels-last, LayerNorm, a pointwise linear expansion x4 + GELU, Global Response Normalisation (GRN: the L2 norm of each channel over the spatial dims, divided by its mean over channels, gamma * (x * N) + beta + x with zero-initialised gamma/beta parameters), a pointwise projection, a permute back and stochastic depth (drop_path_rate 0.1) on the residual; global average pool, LayerNorm and a linear classifier to 10 classes (cross-entropy inside the model with labels)."""
import torch
from transformers import ConvNextV2Config, ConvNextV2ForImageClassification
BATCH_SIZE = 4
def build_model():
    return ConvNextV2ForImageClassification(ConvNextV2Config(num_channels=3, patch_size=2, num_stages=3,
                                                             hidden_sizes=[16, 32, 48], depths=[2, 2, 2],
                                                             drop_path_rate=0.1, image_size=32, num_labels=10))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
