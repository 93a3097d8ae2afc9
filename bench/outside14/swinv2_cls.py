"""HF Swin Transformer V2 for image classification from a tiny config on 32 x 32 images: a 2x2 patch embedding to d 16 + LayerNorm, two stages of depths 2, 2 (2 and 4 heads) with 4 x 4 windows, every second block's windows shifted by 2 (torch.roll of the feature map and an attention mask between the wrapped regions), scaled cosine attention (queries and keys L2-normalised, the logits multiplied by a learned per-head logit scale clamped at log(100) and exponentiated), a continuous relative position bias from a small MLP (Linear-ReLU-Linear, 16 * sigmoid) over log-spaced relative coordinates, post-norm residual blocks (LayerNorm after attention and after the MLP, res-post-norm), stochastic depth (drop_path_rate 0.1: per-sample Bernoulli masks drawn in forward), patch merging between the stages (2 x 2 neighbours concatenated, linear to 2x width, LayerNorm), mean pooling and a linear classifier to 10 classes (cross-entropy inside the model with labels)."""
import torch
from transformers import Swinv2Config, Swinv2ForImageClassification
BATCH_SIZE = 4
def build_model():
    return Swinv2ForImageClassification(Swinv2Config(image_size=32, patch_size=2, num_channels=3, embed_dim=16,
                                                     depths=[2, 2], num_heads=[2, 4], window_size=4, mlp_ratio=2.0,
                                                     drop_path_rate=0.1, hidden_dropout_prob=0.0,
                                                     attention_probs_dropout_prob=0.0, num_labels=10))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
