"""HF LED (Longformer encoder-decoder): sliding-window local attention whose padding is sized from values. Not capturable: kept for the one line a user gets."""
import torch
from transformers import LEDConfig, LEDForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return LEDForConditionalGeneration(LEDConfig(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_encoder_position_embeddings=64, max_decoder_position_embeddings=64, attention_window=8, dropout=0.0, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(3, 128, (b, 16), generator=g), "labels": torch.randint(3, 128, (b, 12), generator=g)}
