"""HF BiT (Big Transfer ResNet-v2) for image classification from a tiny config on 32 x 32 images: every convolution weight-standardised in forward (WeightStandardizedConv2d: the weight normalised per output channel by batch_norm over its flattened fan-in with no running statistics), a 7x7 stride-2 stem conv to 16 channels with dynamic "SAME" padding (global_padding SAME: the pad computed from the input size in forward and applied with F.pad) and a 3x3 stride-2 max-pool padded the same way (DynamicPad2d), pre-activation bottleneck blocks (GroupNorm with 4 groups + ReLU fused as BitGroupNormActivation before each conv, the shortcut a standardised 1x1 conv taken from the pre-activated input where the shape changes) in three stages of depths 1, 1, 1 and widths 32, 64, 96, a final GroupNorm + ReLU, adaptive average pool and a linear classifier to 10 classes (cross-entropy inside the model with labels)."""
import torch
from transformers import BitConfig, BitForImageClassification
BATCH_SIZE = 4
def build_model():
    return BitForImageClassification(BitConfig(num_channels=3, embedding_size=16, hidden_sizes=[32, 64, 96],
                                               depths=[1, 1, 1], layer_type="preactivation", num_groups=4,
                                               global_padding="SAME", embedding_dynamic_padding=True,
                                               out_features=["stage3"], num_labels=10))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
