"""HF MobileBERT masked LM: bottleneck blocks, NoNorm, stacked feed-forwards, an embedding built from a trigram convolution."""
import torch
from transformers import MobileBertConfig, MobileBertForMaskedLM
BATCH_SIZE = 4
def build_model():
    return MobileBertForMaskedLM(MobileBertConfig(vocab_size=128, hidden_size=64, embedding_size=16, num_hidden_layers=2, num_attention_heads=4,
                                                  intermediate_size=32, intra_bottleneck_size=32, true_hidden_size=32, num_feedforward_networks=2,
                                                  max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
