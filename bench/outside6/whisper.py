"""HF Whisper speech-to-text with labels: two Conv1d layers (the second strided) over log-mel features, sinusoidal encoder positions (a frozen embedding), a transformer encoder-decoder with cross-attention, decoder inputs shifted right from the labels, the LM head tied to the decoder's token embedding."""
import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return WhisperForConditionalGeneration(WhisperConfig(vocab_size=128, num_mel_bins=16, d_model=64, encoder_layers=2, decoder_layers=2,
                                                         encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                                         decoder_ffn_dim=128, max_source_positions=32, max_target_positions=32,
                                                         dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                                                         encoder_layerdrop=0.0, decoder_layerdrop=0.0, pad_token_id=0, bos_token_id=1,
                                                         eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None,
                                                         begin_suppress_tokens=None, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_features": torch.randn(b, 16, 64, generator=g), "labels": torch.randint(3, 128, (b, 12), generator=g)}
