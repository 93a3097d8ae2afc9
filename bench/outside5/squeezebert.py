"""HF SqueezeBERT for sequence classification: grouped 1-D convolutions (Conv1d with groups) in place of the attention and FFN Linear layers, on channels-first (b, d, t) activations."""
import torch
from transformers import SqueezeBertConfig, SqueezeBertForSequenceClassification
BATCH_SIZE = 4
def build_model():
    return SqueezeBertForSequenceClassification(SqueezeBertConfig(vocab_size=128, embedding_size=64, hidden_size=64, num_hidden_layers=2,
                                                                  num_attention_heads=4, intermediate_size=128, max_position_embeddings=32,
                                                                  q_groups=2, k_groups=2, v_groups=2, post_attention_groups=2,
                                                                  intermediate_groups=4, output_groups=4, hidden_dropout_prob=0.0,
                                                                  attention_probs_dropout_prob=0.0, num_labels=3))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(0, 128, (b, 16), generator=g), "labels": torch.randint(0, 3, (b,), generator=g)}
