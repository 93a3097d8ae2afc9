"""HF Funnel Transformer for sequence classification: blocks that pool the sequence between them."""
import torch
from transformers import FunnelConfig, FunnelForSequenceClassification
BATCH_SIZE = 4
def build_model():
    return FunnelForSequenceClassification(FunnelConfig(vocab_size=128, block_sizes=[1, 1, 1], num_decoder_layers=1, d_model=32, n_head=4,
                                                        d_head=8, d_inner=64, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, num_labels=3))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(0, 128, (b, 16), generator=g), "labels": torch.randint(0, 3, (b,), generator=g)}
