"""HF MobileViT image classifier: inverted residual convs with transformer blocks over unfolded patches (fold/unfold via reshapes)."""
import torch
from transformers import MobileViTConfig, MobileViTForImageClassification
BATCH_SIZE = 2
def build_model():
    return MobileViTForImageClassification(MobileViTConfig(image_size=64, patch_size=2, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32],
                                                           num_attention_heads=2, mlp_ratio=2.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                           classifier_dropout_prob=0.0, num_labels=4))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 64, 64, generator=g), "labels": torch.randint(0, 4, (b,), generator=g)}
