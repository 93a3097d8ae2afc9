"""OPT (HF): learned positions with offset, project in/out dims."""
import torch
from transformers import OPTConfig, OPTForCausalLM
BATCH_SIZE = 4
def build_model():
    cfg = OPTConfig(vocab_size=128, hidden_size=32, word_embed_proj_dim=16, num_hidden_layers=3, ffn_dim=64,
                    num_attention_heads=4, max_position_embeddings=64, use_cache=False, dropout=0.0,
                    attention_dropout=0.0, do_layer_norm_before=False)
    return OPTForCausalLM(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 128, (b, 16), generator=g)
    return {"input_ids": x, "labels": x}
