"""HF LeViT image classifier: a conv stem, Linear layers each followed by BatchNorm1d, attention biases gathered from a parameter by a fixed buffer of relative-offset indices (cached only in eval mode), subsampling attention between stages, a mean-pooled head."""
import torch
from transformers import LevitConfig, LevitForImageClassification
BATCH_SIZE = 4
def build_model():
    return LevitForImageClassification(LevitConfig(image_size=64, num_channels=3, kernel_size=3, stride=2, padding=1, patch_size=16,
                                                   hidden_sizes=[32, 48, 64], num_attention_heads=[2, 3, 4], depths=[1, 1, 1],
                                                   key_dim=[8, 8, 8], mlp_ratio=[2, 2, 2], attention_ratio=[2, 2, 2],
                                                   num_labels=5))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 64, 64, generator=g), "labels": torch.randint(0, 5, (b,), generator=g)}
