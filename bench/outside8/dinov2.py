"""HF Dinov2 image classifier with labels: patch embedding, a CLS token and position embeddings interpolated to the image's patch grid, LayerScale after attention and MLP, stochastic depth (drop_path_rate 0.1: a per-sample random mask in every block, so its losses draw random numbers), a head over CLS and mean-pooled patch tokens."""
import torch
from transformers import Dinov2Config, Dinov2ForImageClassification
BATCH_SIZE = 4
def build_model():
    return Dinov2ForImageClassification(Dinov2Config(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, mlp_ratio=2, image_size=32,
                                                     patch_size=8, num_channels=3, drop_path_rate=0.1, layerscale_value=0.5, num_labels=10))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
