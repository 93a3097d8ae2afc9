"""HF ViTMAE (masked autoencoder: random patch masking by argsort of noise in forward) from a small config."""
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import ViTMAEConfig, ViTMAEForPreTraining
BATCH_SIZE = 4
def build_model():
    torch.manual_seed(0)
    return ViTMAEForPreTraining(ViTMAEConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                                             num_attention_heads=4, intermediate_size=128, decoder_hidden_size=32,
                                             decoder_num_hidden_layers=1, decoder_num_attention_heads=4,
                                             decoder_intermediate_size=64))
def example_batch(b):
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=torch.Generator().manual_seed(0))}
