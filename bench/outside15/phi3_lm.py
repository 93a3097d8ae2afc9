"""HF Phi-3 causal LM with labels from a tiny config: 3 decoder layers of d 32, one fused query-key-value projection (qkv_proj, 4 query heads and 2 key/value heads of 8 sliced out of its 64 outputs) and one fused gate-up projection (gate_up_proj, its 128 outputs chunked in two for a SiLU-gated MLP of width 64), rotary embeddings, RMSNorm before attention and MLP, residual dropout 0.1 on the attention and MLP outputs before each residual add (random draws in forward; embd_pdrop is not read by this implementation and left 0), untied embeddings; labels the inputs (shifted inside); use_cache off, eager attention."""
import torch
from transformers import Phi3Config, Phi3ForCausalLM
BATCH_SIZE = 4
def build_model():
    return Phi3ForCausalLM(Phi3Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      original_max_position_embeddings=64, resid_pdrop=0.1, embd_pdrop=0.0,
                                      attention_dropout=0.0, tie_word_embeddings=False, use_cache=False,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="eager"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (b, 16), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}
