"""HF Marian MT: an encoder-decoder translator with sinusoidal positions and a shared, tied vocabulary."""
import torch
from transformers import MarianConfig, MarianMTModel
BATCH_SIZE = 4
def build_model():
    return MarianMTModel(MarianConfig(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, dropout=0.0, use_cache=False, decoder_start_token_id=0, pad_token_id=1))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(3, 128, (b, 16), generator=g), "labels": torch.randint(3, 128, (b, 12), generator=g)}
