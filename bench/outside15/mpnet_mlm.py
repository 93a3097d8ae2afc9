"""HF MPNet for masked LM from a tiny config: 3 post-LayerNorm encoder layers of d 32 (4 heads, FFN 64, GELU), learned absolute position embeddings indexed by positions computed from the padding index with cumsum (create_position_ids_from_input_ids, pad 1), plus MPNet's relative position bias: bucketed relative distances (32 buckets, log-spaced) looked up in one learned per-head table computed once in the encoder and added to every layer's attention scores; dropout 0.1 on hidden states and attention probabilities (random draws in forward); an LM head (dense + GELU + LayerNorm + decoder) tied to the word embeddings; about 15% of positions replaced by the mask token (id 3) in example_batch, labels -100 elsewhere, a padded attention_mask (the odd rows' last 4 tokens, set to the pad id)."""
import torch
from transformers import MPNetConfig, MPNetForMaskedLM
BATCH_SIZE = 4
def build_model():
    return MPNetForMaskedLM(MPNetConfig(vocab_size=128, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                                        intermediate_size=64, max_position_embeddings=64,
                                        relative_attention_num_buckets=32, hidden_dropout_prob=0.1,
                                        attention_probs_dropout_prob=0.1, pad_token_id=1, bos_token_id=0,
                                        eos_token_id=2, tie_word_embeddings=True, attn_implementation="eager"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 16
    ids = torch.randint(4, 128, (b, T), generator=g)
    mask = torch.ones(b, T, dtype=torch.long)
    mask[1::2, T - 4:] = 0
    ids[mask == 0] = 1
    chosen = (torch.rand(b, T, generator=g) < 0.15) & (mask == 1)
    chosen[:, 2] = True
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    ids = torch.where(chosen, torch.full_like(ids, 3), ids)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
