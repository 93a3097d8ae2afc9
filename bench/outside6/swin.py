"""HF Swin Transformer image classifier: window attention over 4x4 windows with shifted windows every second block (torch.roll of the feature map and an attention mask), relative position bias tables indexed by a buffer, patch merging between stages."""
import torch
from transformers import SwinConfig, SwinForImageClassification
BATCH_SIZE = 4
def build_model():
    return SwinForImageClassification(SwinConfig(image_size=32, patch_size=2, num_channels=3, embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                                                 window_size=4, mlp_ratio=2.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                 drop_path_rate=0.0, num_labels=10))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
