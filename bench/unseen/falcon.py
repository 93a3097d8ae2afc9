"""A tiny Falcon (HF, random weights): rotary, parallel attention and MLP, multi-query attention."""
import torch
from transformers import FalconConfig, FalconForCausalLM
BATCH_SIZE = 4
def build_model():
    cfg = FalconConfig(vocab_size=128, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                       multi_query=True, parallel_attn=True, new_decoder_architecture=False, use_cache=False,
                       hidden_dropout=0.0, attention_dropout=0.0, bos_token_id=1, eos_token_id=2)
    return FalconForCausalLM(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(3, 128, (b, 24), generator=g)
    return {"input_ids": x, "labels": x}
