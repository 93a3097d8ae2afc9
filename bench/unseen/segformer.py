"""A tiny SegFormer (HF, random weights): hierarchical vision transformer with overlapping patch merges; image classification."""
import torch
from transformers import SegformerConfig, SegformerForImageClassification
BATCH_SIZE = 4
def build_model():
    cfg = SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2], hidden_sizes=[16, 32],
                          patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                          num_labels=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                          classifier_dropout_prob=0.0, drop_path_rate=0.0)
    return SegformerForImageClassification(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 5, (b,), generator=g)}
