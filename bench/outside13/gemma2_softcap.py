"""HF Gemma-2 causal LM with labels from a tiny config: 4 decoder layers of d 32 alternating sliding-window (window 8) and global attention, grouped-query attention (4 heads of 16, 2 key/value heads), attention-logit soft-capping (tanh at 50) and final-logit soft-capping (30), query scaling by query_pre_attn_scalar, pre- and post-norms around both attention and the gated GELU-tanh MLP (RMSNorm with 1 + weight), embeddings scaled by sqrt(d) and tied to the lm_head; labels the inputs (shifted inside)."""
import torch
from transformers import Gemma2Config, Gemma2ForCausalLM
BATCH_SIZE = 4
def build_model():
    return Gemma2ForCausalLM(Gemma2Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                                          num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                          max_position_embeddings=64, sliding_window=8, query_pre_attn_scalar=16,
                                          attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                                          attention_dropout=0.0, tie_word_embeddings=True, pad_token_id=0,
                                          attn_implementation="eager"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 128, (b, 16), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}
