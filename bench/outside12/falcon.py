"""HF Falcon causal LM with labels from a tiny config in its original (Falcon-7B) layout: parallel attention and MLP (parallel_attn: one input_layernorm output feeds both the attention and the GELU MLP, whose outputs are added to the residual together), multi-query attention (4 query heads sharing one key/value head, the fused query_key_value projection split by view), rotary position embeddings (alibi off), no biases, 3 layers of d 32 with an MLP of 4 x d, the word embeddings tied to the lm_head; a padded attention_mask (the odd rows' last 5 tokens) with labels -100 there, and the shifted causal cross-entropy computed inside the model."""
import torch
from transformers import FalconConfig, FalconForCausalLM
BATCH_SIZE = 4
def build_model():
    return FalconForCausalLM(FalconConfig(vocab_size=160, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, multi_query=True,
                                          parallel_attn=True, new_decoder_architecture=False, alibi=False, bias=False,
                                          max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0,
                                          tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 20
    ids = torch.randint(3, 160, (b, T), generator=g)
    mask = torch.ones(b, T, dtype=torch.long)
    mask[1::2, T - 5:] = 0
    ids[mask == 0] = 0
    labels = ids.clone()
    labels[mask == 0] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
