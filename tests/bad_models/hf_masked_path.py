"""(bench/outside5) HF Nystromformer for sequence classification: Nystrom-approximated attention over landmark means (segment means by reshape), the Moore-Penrose pseudo-inverse by six Newton iterations of matmuls in forward, a depthwise conv on values."""
import torch
from transformers import NystromformerConfig, NystromformerForSequenceClassification
BATCH_SIZE = 4
def build_model():
    return NystromformerForSequenceClassification(NystromformerConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                                      intermediate_size=64, max_position_embeddings=64, segment_means_seq_len=32,
                                                                      num_landmarks=8, conv_kernel_size=5, inv_coeff_init_option=False,
                                                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(0, 128, (b, 32), generator=g), "labels": torch.randint(0, 3, (b,), generator=g)}
