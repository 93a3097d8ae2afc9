"""HF ProphetNet (n-gram prediction encoder-decoder): its forward checks the shifted labels' values (`assert torch.all(...)`). Not capturable: kept for the one line a user gets."""
import torch
from transformers import ProphetNetConfig, ProphetNetForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return ProphetNetForConditionalGeneration(ProphetNetConfig(vocab_size=128, hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64, num_encoder_layers=2, num_decoder_layers=2, num_encoder_attention_heads=4, num_decoder_attention_heads=4, max_position_embeddings=64, ngram=2, dropout=0.0, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(3, 128, (b, 16), generator=g), "labels": torch.randint(3, 128, (b, 12), generator=g)}
