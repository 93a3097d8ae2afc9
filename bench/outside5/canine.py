"""HF CANINE for sequence classification over raw Unicode code points: hash embeddings (ids multiplied by primes, modulo buckets), local attention over characters, a strided Conv1d downsampling to a deep transformer; the upsampling stage (repeat_interleave, a conv, a final character layer) runs but the pooled classifier never reads it, so its parameters get no gradient."""
import torch
from transformers import CanineConfig, CanineForSequenceClassification
BATCH_SIZE = 4
def build_model():
    return CanineForSequenceClassification(CanineConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                                        max_position_embeddings=128, num_hash_functions=4, num_hash_buckets=256,
                                                        downsampling_rate=4, upsampling_kernel_size=4, local_transformer_stride=16,
                                                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(32, 1200, (b, 32), generator=g), "labels": torch.randint(0, 3, (b,), generator=g)}
