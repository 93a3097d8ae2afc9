"""HF PVTv2 image classifier with labels: overlapping strided-conv patch embeddings at four stages, spatial-reduction attention (keys and values from a strided Conv2d over the token map, LayerNorm after), a depthwise Conv2d inside every MLP, token maps reshaped between sequences and images at each stage."""
import torch
from transformers import PvtV2Config, PvtV2ForImageClassification
BATCH_SIZE = 4
def build_model():
    return PvtV2ForImageClassification(PvtV2Config(image_size=32, num_channels=3, num_encoder_blocks=4, depths=[1, 1, 2, 1], sr_ratios=[4, 2, 1, 1],
                                                   hidden_sizes=[16, 32, 48, 64], patch_sizes=[7, 3, 3, 3], strides=[4, 2, 2, 2],
                                                   num_attention_heads=[1, 2, 2, 4], mlp_ratios=[4, 4, 4, 4], num_labels=10, drop_path_rate=0.0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
