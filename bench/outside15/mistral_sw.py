"""HF Mistral causal LM with labels from a tiny config whose sliding_window (6) is shorter than the 16-token sequence: every layer's causal mask also hides keys more than 6 positions back (a banded mask built by create_sliding_window_causal_mask), 3 decoder layers of d 32, grouped-query attention (4 query heads, 2 key/value heads) with rotary embeddings, RMSNorm before attention and MLP, SwiGLU MLP of width 64, untied embeddings, no dropout; a padded attention_mask (the odd rows' last 4 tokens) with labels -100 there; labels shifted inside; use_cache off, eager attention."""
import torch
from transformers import MistralConfig, MistralForCausalLM
BATCH_SIZE = 4
def build_model():
    return MistralForCausalLM(MistralConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                            sliding_window=6, tie_word_embeddings=False, attention_dropout=0.0,
                                            use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                            attn_implementation="eager"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 16
    ids = torch.randint(3, 128, (b, T), generator=g)
    mask = torch.ones(b, T, dtype=torch.long)
    mask[1::2, T - 4:] = 0
    labels = ids.clone()
    labels[mask == 0] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
