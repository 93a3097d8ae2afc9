"""HF ELECTRA discriminator pre-training: replaced-token detection with a float label per token (BCE loss)."""
import torch
from transformers import ElectraConfig, ElectraForPreTraining
BATCH_SIZE = 4
def build_model():
    return ElectraForPreTraining(ElectraConfig(vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                               intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(0, 128, (b, 16), generator=g), "labels": torch.randint(0, 2, (b, 16), generator=g)}
