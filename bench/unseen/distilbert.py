"""A tiny DistilBERT (HF) for sequence classification."""
import torch
from transformers import DistilBertConfig, DistilBertForSequenceClassification
BATCH_SIZE = 4
def build_model():
    cfg = DistilBertConfig(vocab_size=128, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64,
                           dropout=0.0, attention_dropout=0.0, num_labels=3)
    return DistilBertForSequenceClassification(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(0, 128, (b, 16), generator=g), "labels": torch.randint(0, 3, (b,), generator=g)}
