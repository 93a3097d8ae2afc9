"""HF XGLM causal LM with labels from a tiny config: 3 pre-LayerNorm decoder layers of d 32 (4 heads, FFN 64, GELU), token embeddings scaled by sqrt(d) (scale_embedding), fixed sinusoidal position embeddings (a non-trainable table indexed by positions computed from the padding mask with cumsum, offset 2 past the padding index), dropout 0.1 on embeddings and activations and attention dropout 0.1, a final LayerNorm and an lm_head tied to the embeddings; a padded attention_mask (the odd rows' last 4 tokens) with labels -100 there; labels shifted inside; use_cache off, eager attention."""
import torch
from transformers import XGLMConfig, XGLMForCausalLM
BATCH_SIZE = 4
def build_model():
    return XGLMForCausalLM(XGLMConfig(vocab_size=128, d_model=32, ffn_dim=64, num_layers=3, attention_heads=4,
                                      max_position_embeddings=64, dropout=0.1, attention_dropout=0.1,
                                      activation_dropout=0.0, scale_embedding=True, tie_word_embeddings=True,
                                      use_cache=False, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                      attn_implementation="eager"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 16
    ids = torch.randint(3, 128, (b, T), generator=g)
    mask = torch.ones(b, T, dtype=torch.long)
    mask[1::2, T - 4:] = 0
    ids[mask == 0] = 1
    labels = ids.clone()
    labels[mask == 0] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
