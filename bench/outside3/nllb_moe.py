"""HF NLLB-MoE: an encoder-decoder whose every second layer routes tokens to top-2 experts (LayerDrop set to 0: with it, a random draw decides which layers run). Its experts pick their tokens with nonzero: not capturable, kept for the one line a user gets."""
import torch
from transformers import NllbMoeConfig, NllbMoeForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return NllbMoeForConditionalGeneration(NllbMoeConfig(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_experts=4, expert_capacity=16, encoder_sparse_step=2, decoder_sparse_step=2, encoder_layerdrop=0.0, decoder_layerdrop=0.0, max_position_embeddings=64, dropout=0.0, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(3, 128, (b, 16), generator=g), "labels": torch.randint(3, 128, (b, 12), generator=g)}
