"""VisionEncoderDecoder (HF): a ViT encoder, a GPT-2 decoder with cross-attention."""
import torch
from transformers import GPT2Config, ViTConfig, VisionEncoderDecoderConfig, VisionEncoderDecoderModel
BATCH_SIZE = 4
def build_model():
    enc = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32, patch_size=8)
    dec = GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=32, add_cross_attention=True, is_decoder=True, use_cache=False)
    cfg = VisionEncoderDecoderConfig.from_encoder_decoder_configs(enc, dec)
    cfg.decoder_start_token_id = 0; cfg.pad_token_id = 0
    return VisionEncoderDecoderModel(config=cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(1, 128, (b, 10), generator=g)}
