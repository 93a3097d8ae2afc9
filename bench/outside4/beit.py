"""HF BEiT image classifier: relative position bias in each layer, layer-scale (lambda) parameters, mean pooling."""
import torch
from transformers import BeitConfig, BeitForImageClassification
BATCH_SIZE = 4
def build_model():
    return BeitForImageClassification(BeitConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                 intermediate_size=64, use_relative_position_bias=True, use_mean_pooling=True,
                                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0, num_labels=5))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 5, (b,), generator=g)}
