"""HF GPT-J causal LM with labels from a tiny config: 3 decoder blocks of d 32 (4 heads of 8) each with one LayerNorm feeding attention and MLP in parallel (block output = attention + MLP + residual), rotary embeddings on only the first 4 of each head's 8 dimensions (rotary_dim 4, GPT-J's interleaved rotate-every-two form, sin/cos gathered from a fixed buffer by position ids), the rest passed through, no biases on q/k/v/out projections, a gelu_new MLP of width 128, dropout 0.1 on embeddings, residuals and attention probabilities (random draws in forward), a final LayerNorm and an untied lm_head with bias; labels the inputs (shifted inside); use_cache off, eager attention."""
import torch
from transformers import GPTJConfig, GPTJForCausalLM
BATCH_SIZE = 4
def build_model():
    return GPTJForCausalLM(GPTJConfig(vocab_size=128, n_positions=64, n_embd=32, n_layer=3, n_head=4, rotary_dim=4,
                                      n_inner=128, resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                                      tie_word_embeddings=False, use_cache=False, bos_token_id=1, eos_token_id=2,
                                      pad_token_id=0, attn_implementation="eager"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (b, 16), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}
