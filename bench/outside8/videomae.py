"""HF VideoMAE video classifier with labels: a tubelet Conv3d patch embedding (2 frames x 8 x 8 pixels), fixed sinusoidal position table, pre-norm ViT blocks whose qkv bias is a concatenation of a learned q bias, zeros and a learned v bias, mean-pooled tokens into a LayerNorm and the classifier."""
import torch
from transformers import VideoMAEConfig, VideoMAEForVideoClassification
BATCH_SIZE = 4
def build_model():
    return VideoMAEForVideoClassification(VideoMAEConfig(image_size=32, patch_size=8, num_channels=3, num_frames=4, tubelet_size=2, hidden_size=64,
                                                         num_hidden_layers=3, num_attention_heads=4, intermediate_size=128, qkv_bias=True,
                                                         use_mean_pooling=True, num_labels=6))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 4, 3, 32, 32, generator=g), "labels": torch.randint(0, 6, (b,), generator=g)}
