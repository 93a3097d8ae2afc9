"""HF RoFormer masked language model with labels: word + token-type embeddings (no absolute position table) and LayerNorm, then encoder layers whose self-attention applies rotary position embeddings to queries and keys (a sinusoidal cos/sin table computed once in forward from the sequence length and passed to every layer, the rotation done by interleaving even/odd dims via stack/reshape), padding mask built from attention_mask in forward, an MLM head (dense + GELU + LayerNorm + decoder tied to the word embeddings) and the masked-LM cross-entropy inside the model, labels -100 on the unmasked positions."""
import torch
from transformers import RoFormerConfig, RoFormerForMaskedLM
BATCH_SIZE = 4
VOCAB = 128


def build_model():
    return RoFormerForMaskedLM(RoFormerConfig(vocab_size=VOCAB, embedding_size=64, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                              intermediate_size=128, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                              attention_probs_dropout_prob=0.0, rotary_value=False, use_cache=False, pad_token_id=0))


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB, (b, 24), generator=g)
    mask = torch.rand(b, 24, generator=g) < 0.15
    mask[:, 0] = True
    labels = torch.where(mask, ids, torch.full_like(ids, -100))
    inputs = torch.where(mask, torch.full_like(ids, 4), ids)
    attn = torch.ones(b, 24, dtype=torch.long)
    attn[:, 20:] = 0
    inputs[:, 20:] = 0
    labels[:, 20:] = -100
    return {"input_ids": inputs, "attention_mask": attn, "labels": labels}
