"""HF RegNet (RegNetY: squeeze-and-excitation in every block) for image classification from a tiny config on 32 x 32 images: an embedder (3x3 stride-2 conv to 16 + BatchNorm + ReLU), four stages of depths 1, 1, 2, 1 and widths 16, 32, 48, 64 built of X-layers with grouped 3x3 convolutions (groups_width 8) and the Y-layer's squeeze-and-excitation (reduced to a quarter of the block's input width), shortcuts by strided 1x1 conv + BN where the shape changes, global pooling and a linear classifier to 10 classes (cross-entropy inside the model with labels)."""
import torch
from transformers import RegNetConfig, RegNetForImageClassification
BATCH_SIZE = 4
def build_model():
    return RegNetForImageClassification(RegNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32, 48, 64],
                                                     depths=[1, 1, 2, 1], groups_width=8, layer_type="y",
                                                     hidden_act="relu", downsample_in_first_stage=True,
                                                     num_labels=10))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
