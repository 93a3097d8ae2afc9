"""HF DeBERTa-v2 for sequence classification from a tiny config: 3 layers of d 32 (4 heads, FFN 64), disentangled attention with relative positions (content-to-position and position-to-content, position buckets 16, max relative positions 32, the relative embeddings shared across layers with their own LayerNorm), no absolute position embeddings, a 1-D convolution layer beside the first layer's output (conv_kernel_size 3), the pooler and a 3-class classifier with cross-entropy inside the model; a padded attention_mask (every third row's last 7 tokens)."""
import torch
from transformers import DebertaV2Config, DebertaV2ForSequenceClassification
BATCH_SIZE = 4
def build_model():
    return DebertaV2ForSequenceClassification(DebertaV2Config(
        vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, relative_attention=True, position_buckets=16, max_relative_positions=32,
        pos_att_type=["p2c", "c2p"], position_biased_input=False, share_att_key=True, norm_rel_ebd="layer_norm",
        conv_kernel_size=3, conv_act="gelu", num_labels=3, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
        pad_token_id=0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 20
    ids = torch.randint(1, 100, (b, T), generator=g)
    mask = torch.ones(b, T, dtype=torch.long)
    mask[::3, T - 7:] = 0
    ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.randint(0, 3, (b,), generator=g)}
