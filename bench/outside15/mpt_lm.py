"""HF MPT causal LM with labels from a tiny config: no positional embeddings at all, position enters only through ALiBi (per-head linear distance biases with slopes 2^(-8h/H), built in forward for the full max_seq_len 32 and sliced to the 16-token sequence, added to the attention scores), 3 pre-LayerNorm decoder blocks of d 32 (4 heads, one fused Wqkv projection, no biases anywhere: no_bias), a GELU MLP of width 128 (expansion_ratio 4), dropout 0.1 on the attention probabilities, the MLP output and the attention branch before its residual add (the three places HF's MPT reads attn_pdrop; set on the modules after building because MptAttentionConfig types attn_pdrop as int and rejects 0.1; random draws in forward; resid_pdrop / emb_pdrop are not read by this implementation and left 0), an lm_head tied to the embeddings; labels the inputs (shifted inside); use_cache off."""
import torch
from transformers import MptConfig, MptForCausalLM
BATCH_SIZE = 4
def build_model():
    cfg = MptConfig(d_model=32, n_heads=4, n_layers=3, expansion_ratio=4, max_seq_len=32,
                    vocab_size=128, resid_pdrop=0.0, emb_pdrop=0.0,
                    attn_config={"alibi": True, "alibi_bias_max": 8},
                    no_bias=True, tie_word_embeddings=True, use_cache=False, pad_token_id=0,
                    bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    model = MptForCausalLM(cfg)
    for blk in model.transformer.blocks:  # MptAttentionConfig types attn_pdrop as int and rejects 0.1: set on the modules
        blk.attn.attn_dropout_p, blk.ffn.hidden_dropout, blk.resid_attn_dropout.p = 0.1, 0.1, 0.1
    return model
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (b, 16), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}
