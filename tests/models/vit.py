"""A tiny ViT (HF, random weights): patch embedding (a convolution), CLS token, classifier."""
import torch
from transformers import ViTConfig, ViTForImageClassification
BATCH_SIZE = 4
def build_model():
    cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64, num_labels=10, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)
    return ViTForImageClassification(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
