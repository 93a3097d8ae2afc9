"""HF Hiera image classification with labels on 64 x 64 images: a strided conv patch embedding (16 x 16 tokens) plus a learned position table, then the tokens are unrolled in forward (repeated view/permute/flatten by the 2 x 2 query stride) so that each 8 x 8 mask unit and each pooling window is contiguous; three stages (16 -> 32 -> 64 channels) where the first two stages and the first layer of the third (lagging one layer) use mask-unit attention (qkv reshaped into per-window blocks, no mask tensors at all) and the last layer global attention, and at each stage change the layer-normed input is read twice, by a projection whose output is max-pooled over the unrolled stride axis (view(...).max(dim=1)) for the residual and by the attention whose queries are max-pooled the same way (query stride 4), so the token count drops 256 -> 64 -> 16 without any pooling module; mean pooling with LayerNorm, a linear classifier and the cross-entropy inside the model."""
import torch
from transformers import HieraConfig, HieraForImageClassification
BATCH_SIZE = 4
def build_model():
    return HieraForImageClassification(HieraConfig(embed_dim=16, image_size=[64, 64], patch_size=[7, 7], patch_stride=[4, 4],
                                                   patch_padding=[3, 3], mlp_ratio=2.0, depths=[1, 1, 2], num_heads=[1, 2, 4],
                                                   embed_dim_multiplier=2.0, num_query_pool=2, query_stride=[2, 2],
                                                   masked_unit_size=[8, 8], masked_unit_attention=[True, True, False],
                                                   drop_path_rate=0.0, num_labels=10))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 64, 64, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
