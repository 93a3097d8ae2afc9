"""HF TimeSformer video classifier with labels: divided space-time attention (each block attends over time for every patch, then over space for every frame, with the CLS token repeated per frame and averaged back), rearranged between the two with reshapes and permutes, a temporal position embedding."""
import torch
from transformers import TimesformerConfig, TimesformerForVideoClassification
BATCH_SIZE = 4
def build_model():
    return TimesformerForVideoClassification(TimesformerConfig(image_size=32, patch_size=8, num_channels=3, num_frames=4, hidden_size=64,
                                                               num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                                               attention_type="divided_space_time", num_labels=6))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 4, 3, 32, 32, generator=g), "labels": torch.randint(0, 6, (b,), generator=g)}
