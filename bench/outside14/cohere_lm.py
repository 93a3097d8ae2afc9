"""HF Cohere (Command-R) causal LM with labels from a tiny config: 3 decoder layers of d 32 whose blocks are parallel (one input LayerNorm, then attention and the gated SiLU MLP of width 64 both read the same normed input and both outputs are added to the residual in one sum), the LayerNorms without bias (a hand-written mean/variance normalisation in float32 times a weight), grouped-query attention (4 query heads of 8, 2 key/value heads) with query-key norm (use_qk_norm: bias-free LayerNorms over each head's 8 dimensions with a weight per (head, dimension), on queries and keys), interleaved rotary embeddings (pairs of adjacent dimensions rotated, repeat_interleave'd cos/sin), and the final logits multiplied by logit_scale 0.0625 with the lm_head tied to the embeddings; labels the inputs (shifted inside); use_cache off, eager attention."""
import torch
from transformers import CohereConfig, CohereForCausalLM
BATCH_SIZE = 4
def build_model():
    return CohereForCausalLM(CohereConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                          logit_scale=0.0625, use_qk_norm=True, attention_dropout=0.0,
                                          tie_word_embeddings=True, use_cache=False, pad_token_id=0, bos_token_id=1,
                                          eos_token_id=2, attn_implementation="eager"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 128, (b, 16), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}
