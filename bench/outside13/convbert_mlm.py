"""HF ConvBERT for masked language modelling from a tiny config: 3 layers of d 32, mixed attention (head_ratio 2: 2 self-attention heads beside span-based dynamic convolution heads, conv_kernel_size 5, a depthwise-separable key convolution and a kernel generated per token), grouped feed-forward (num_groups 2), embeddings of size 24 projected to d, the MLM head's decoder tied to the word embeddings; 15% of the positions masked (labels -100 elsewhere) and a padded attention_mask (every other row's last 3 tokens)."""
import torch
from transformers import ConvBertConfig, ConvBertForMaskedLM
BATCH_SIZE = 4
def build_model():
    return ConvBertForMaskedLM(ConvBertConfig(vocab_size=110, hidden_size=32, embedding_size=24, num_hidden_layers=3,
                                              num_attention_heads=4, intermediate_size=64, head_ratio=2,
                                              conv_kernel_size=5, num_groups=2, max_position_embeddings=64,
                                              hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                                              pad_token_id=0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 18
    ids = torch.randint(5, 110, (b, T), generator=g)
    mask = torch.ones(b, T, dtype=torch.long)
    mask[1::2, T - 3:] = 0
    labels = torch.full((b, T), -100)
    pick = (torch.rand(b, T, generator=g) < 0.15) & (mask == 1)
    pick[:, 1] = True
    labels[pick] = ids[pick]
    ids = ids.masked_fill(pick, 4)
    ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
