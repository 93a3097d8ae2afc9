"""HF StableLM causal LM with labels, configured with its less common options: partial rotary embeddings (partial_rotary_factor 0.25, so only the first 2 of each head's 8 dims are rotated and the rest concatenated back), per-head LayerNorm on queries and keys (qk_layernorm: a separate LayerNorm module per head, applied by splitting the heads and stacking the results), biases on the q/k/v projections only (use_qkv_bias), the parallel residual (use_parallel_residual: attention and the SiLU-gated MLP both read the same input_layernorm output and are added to the residual together, no post-attention norm), grouped-query attention (4 query heads over 2 key/value heads), 3 layers of d 32 with an untied lm_head; a padded attention_mask (the odd rows' last 4 tokens) with labels -100 there, and the shifted causal cross-entropy computed inside the model."""
import torch
from transformers import StableLmConfig, StableLmForCausalLM
BATCH_SIZE = 4
def build_model():
    return StableLmForCausalLM(StableLmConfig(vocab_size=192, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                                              num_key_value_heads=2, max_position_embeddings=64, partial_rotary_factor=0.25, qk_layernorm=True,
                                              use_qkv_bias=True, use_parallel_residual=True, hidden_dropout=0.0, attention_dropout=0.0,
                                              tie_word_embeddings=False, pad_token_id=0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 24
    ids = torch.randint(1, 192, (b, T), generator=g)
    mask = torch.ones(b, T, dtype=torch.long)
    mask[1::2, T - 4:] = 0
    ids[mask == 0] = 0
    labels = ids.clone()
    labels[mask == 0] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
