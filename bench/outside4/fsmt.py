"""HF FSMT (fairseq's WMT translation transformer): separate source and target vocabularies, sinusoidal positions."""
import torch
from transformers import FSMTConfig, FSMTForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return FSMTForConditionalGeneration(FSMTConfig(src_vocab_size=96, tgt_vocab_size=80, d_model=32, encoder_layers=2, decoder_layers=2,
                                                   encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                                   max_position_embeddings=64, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                                                   langs=["en", "de"], use_cache=False, tie_word_embeddings=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(4, 80, (b, 12), generator=g), "labels": torch.randint(4, 80, (b, 10), generator=g)}
