"""HF DeBERTa-v2 for sequence classification, its loss outside the model: (inputs dict, labels) and loss_fn."""
import torch, torch.nn.functional as F
from transformers import DebertaV2Config, DebertaV2ForSequenceClassification
BATCH_SIZE = 4
def build_model():
    cfg = DebertaV2Config(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=64, relative_attention=True, position_buckets=16, max_relative_positions=32,
                          pos_att_type=["p2c", "c2p"], num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return DebertaV2ForSequenceClassification(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(0, 128, (b, 16), generator=g)}, torch.randint(0, 3, (b,), generator=g)
def loss_fn(out, labels):
    return F.cross_entropy(out.logits, labels)
