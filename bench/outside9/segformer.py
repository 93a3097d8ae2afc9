"""HF SegFormer semantic segmentation with labels: a hierarchical encoder of overlapping patch embeddings (strided convs with padding, 32 -> 8 -> 4 -> 2 pixels) whose efficient self-attention shrinks keys and values by a strided conv (sequence reduction ratio 4/2/1), Mix-FFN blocks with a depthwise conv between the linears, every stage's tokens reshaped back to a feature map; an all-MLP decode head projects all three scales, upsamples each to the finest one and concatenates them, and the 8 x 8 logits are bilinearly upsampled to the 32 x 32 label map inside the loss (cross-entropy with ignore_index 255 on the top two label rows)."""
import torch
from transformers import SegformerConfig, SegformerForSemanticSegmentation
BATCH_SIZE = 4
def build_model():
    return SegformerForSemanticSegmentation(SegformerConfig(num_channels=3, num_encoder_blocks=3, depths=[1, 1, 1], sr_ratios=[4, 2, 1],
                                                            hidden_sizes=[16, 32, 64], patch_sizes=[7, 3, 3], strides=[4, 2, 2],
                                                            num_attention_heads=[1, 2, 4], mlp_ratios=[2, 2, 2], decoder_hidden_size=32,
                                                            num_labels=6, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                            classifier_dropout_prob=0.0, drop_path_rate=0.0, semantic_loss_ignore_index=255))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 6, (b, 32, 32), generator=g)
    labels[:, :2] = 255
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": labels}
