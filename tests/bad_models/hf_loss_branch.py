"""HF's DeBERTa-v2 for sequence classification, given labels: it computes its loss inside the model, counting the
labels >= 0 first (`nonzero`) and branching on that count, which torch.export cannot capture."""
import torch
from transformers import DebertaV2Config, DebertaV2ForSequenceClassification
BATCH_SIZE = 4
def build_model():
    cfg = DebertaV2Config(vocab_size=128, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                          intermediate_size=64, max_position_embeddings=64, relative_attention=True,
                          position_buckets=16, pos_att_type=["p2c", "c2p"], num_labels=3,
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return DebertaV2ForSequenceClassification(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(3, 128, (b, 24), generator=g), "labels": torch.randint(0, 3, (b,), generator=g)}
