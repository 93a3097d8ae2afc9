"""A tiny ALBERT (HF): one layer's weights shared across all depths, factorized embedding."""
import torch
from transformers import AlbertConfig, AlbertForMaskedLM
BATCH_SIZE = 4
def build_model():
    cfg = AlbertConfig(vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0)
    return AlbertForMaskedLM(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 128, (b, 16), generator=g)
    return {"input_ids": x, "labels": x.clone()}
