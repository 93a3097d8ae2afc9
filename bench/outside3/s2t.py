"""HF Speech2Text: a convolutional subsampler over filterbank features, a transformer encoder-decoder, random weights."""
import torch
from transformers import Speech2TextConfig, Speech2TextForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    cfg = Speech2TextConfig(vocab_size=64, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=64,
                            max_target_positions=32, num_conv_layers=2, conv_channels=32, input_feat_per_channel=20,
                            input_channels=1, dropout=0.0, use_cache=False)
    return Speech2TextForConditionalGeneration(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_features": torch.randn(b, 48, 20, generator=g), "labels": torch.randint(3, 64, (b, 10), generator=g)}
