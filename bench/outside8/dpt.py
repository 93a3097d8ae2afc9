"""HF DPT monocular depth estimation, trained against a random 64 x 64 depth map (the head upsamples the 32-pixel image twice) with an L1 loss (loss_fn): a ViT backbone whose four intermediate layers' tokens are reassembled into feature maps at four scales (transposed convs up, a strided conv down), fused coarse to fine by residual conv units with bilinear upsampling, and a conv head; so four values from inside the encoder cross any pipeline cut after them."""
import torch
import torch.nn.functional as F
from transformers import DPTConfig, DPTForDepthEstimation
BATCH_SIZE = 4
def build_model():
    return DPTForDepthEstimation(DPTConfig(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128, image_size=32,
                                           patch_size=8, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[16, 32, 64, 64],
                                           reassemble_factors=[4, 2, 1, 0.5], fusion_hidden_size=32, head_in_index=-1,
                                           add_projection=False, use_auxiliary_head=False, is_hybrid=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return ({"pixel_values": torch.randn(b, 3, 32, 32, generator=g)}, torch.rand(b, 64, 64, generator=g))
def loss_fn(out, target):
    return F.l1_loss(out.predicted_depth, target)
