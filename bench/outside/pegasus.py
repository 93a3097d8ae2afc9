"""Pegasus (HF): encoder-decoder, sinusoidal positions, pre-norm."""
import torch
from transformers import PegasusConfig, PegasusForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    cfg = PegasusConfig(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                        use_cache=False, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    return PegasusForConditionalGeneration(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(3, 128, (b, 16), generator=g), "labels": torch.randint(3, 128, (b, 12), generator=g)}
