"""HF OLMo-2 causal LM with labels from a tiny config: 3 decoder layers of d 32 (4 query heads, 2 key/value heads: grouped-query attention), RMSNorm over the whole query and key projections (q_norm / k_norm on all heads' 32 and 16 dimensions at once, before the head split and rotary embeddings), OLMo-2's reordered norms: no norm before attention or MLP, instead RMSNorm applied to each sublayer's output (post_attention_layernorm, post_feedforward_layernorm) before it is added to the residual stream; SwiGLU MLP of width 64, rotary embeddings, a final RMSNorm and untied embeddings, no dropout; labels the inputs (shifted inside); use_cache off, eager attention."""
import torch
from transformers import Olmo2Config, Olmo2ForCausalLM
BATCH_SIZE = 4
def build_model():
    return Olmo2ForCausalLM(Olmo2Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                        tie_word_embeddings=False, attention_dropout=0.0, use_cache=False,
                                        pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                        attn_implementation="eager"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (b, 16), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}
