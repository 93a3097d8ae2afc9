"""A tiny Whisper (HF): a convolutional audio front end, encoder-decoder attention."""
import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    cfg = WhisperConfig(vocab_size=128, num_mel_bins=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, d_model=32,
                        max_source_positions=16, max_target_positions=32, use_cache=False, dropout=0.0,
                        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    return WhisperForConditionalGeneration(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_features": torch.randn(b, 16, 32, generator=g), "labels": torch.randint(3, 128, (b, 12), generator=g)}
