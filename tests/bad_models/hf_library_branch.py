"""HF FSMT: its model builds a padding mask and branches on whether it has any padding (a value)."""
import torch
from transformers import FSMTConfig, FSMTForConditionalGeneration

BATCH_SIZE = 8


def build_model():
    return FSMTForConditionalGeneration(FSMTConfig(src_vocab_size=64, tgt_vocab_size=64, d_model=16, encoder_layers=1,
                                                   decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                                                   encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32,
                                                   langs=["en", "de"], use_cache=False, tie_word_embeddings=False))


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(4, 64, (b, 8), generator=g), "labels": torch.randint(4, 64, (b, 8), generator=g)}
