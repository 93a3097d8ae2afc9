"""A tiny Swin (HF): windowed attention with shifted windows and relative position bias, patch merging."""
import torch
from transformers import SwinConfig, SwinForImageClassification
BATCH_SIZE = 4
def build_model():
    cfg = SwinConfig(image_size=32, patch_size=4, num_channels=3, embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                     window_size=4, num_labels=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     drop_path_rate=0.0)
    return SwinForImageClassification(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
