"""HF FocalNet for image classification from a tiny config on 32 x 32 images: a 2x2 patch embedding to d 16 + LayerNorm, two stages of depths 2, 2 (widths 16, 32, a strided conv patch embedding between them), each block's attention replaced by focal modulation (a linear projection to query, context and focal_level + 1 gates; the context passed through focal_level 3 successive depthwise convs of growing kernels 3, 5, 7 each + GELU, every level's output multiplied by its gate and accumulated, plus a global level from the mean-pooled context; a 1x1 conv "h" turning the aggregate into the modulator, multiplied into the query, a projection out), layer-scale (gamma parameters at 1e-4) on both residual branches, post-LayerNorm in the modulation, stochastic depth (drop_path_rate 0.1), mean pooling, LayerNorm and a linear classifier to 10 classes (cross-entropy inside the model with labels)."""
import torch
from transformers import FocalNetConfig, FocalNetForImageClassification
BATCH_SIZE = 4
def build_model():
    return FocalNetForImageClassification(FocalNetConfig(image_size=32, patch_size=2, num_channels=3, embed_dim=16,
                                                         hidden_sizes=[16, 32], depths=[2, 2], focal_levels=[3, 3],
                                                         focal_windows=[3, 3], mlp_ratio=2.0, drop_path_rate=0.1,
                                                         use_layerscale=True, layerscale_value=1e-4,
                                                         use_post_layernorm_in_modulation=True,
                                                         normalize_modulator=True, out_features=["stage2"],
                                                         num_labels=10))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
