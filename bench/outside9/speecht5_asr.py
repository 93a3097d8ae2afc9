"""HF SpeechT5 speech recognition with labels: a raw 3200-sample waveform goes through a wav2vec2-style conv feature encoder (three strided Conv1d layers, the first with GroupNorm, 3200 -> 159 frames), a feature projection and a grouped-conv positional embedding, then a post-norm transformer encoder whose relative position bias (an Embedding lookup of clamped pairwise offsets) is built once in forward and reused by every encoder layer; the frame-level padding mask is derived in forward from the sample-level attention_mask through the conv length formula; the text decoder (prenet embedding with sinusoidal positions, decoder_input_ids shifted right from labels in forward) cross-attends to the encoder output in every layer, the output projection is tied to the input embedding, and the cross-entropy over labels (padded positions -100) is computed inside the model; SpecAugment is off, so the masked_spec_embed parameter never gets a gradient."""
import torch
from transformers import SpeechT5Config, SpeechT5ForSpeechToText
BATCH_SIZE = 4
def build_model():
    return SpeechT5ForSpeechToText(SpeechT5Config(
        vocab_size=64, hidden_size=48, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=96, decoder_layers=2,
        decoder_attention_heads=4, decoder_ffn_dim=96, encoder_layerdrop=0.0, decoder_layerdrop=0.0, positional_dropout=0.0,
        hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
        conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4, apply_spec_augment=False, encoder_max_relative_position=32,
        max_speech_positions=256, max_text_positions=64, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    wav = torch.randn(b, 3200, generator=g)
    mask = torch.ones(b, 3200, dtype=torch.long)
    mask[1::2, 2800:] = 0
    wav[mask == 0] = 0.0
    labels = torch.randint(3, 64, (b, 14), generator=g)
    labels[:, 12:] = -100
    return {"input_values": wav, "attention_mask": mask, "labels": labels}
