"""A tiny Mixtral (HF transformers, random weights): a mixture-of-experts causal LM, 4 experts, top-2
routing per token, grouped-query attention."""
import torch
from torch import nn
from transformers import MixtralConfig, MixtralForCausalLM
BATCH_SIZE = 4
def build_model():
    cfg = MixtralConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
                        use_cache=False)
    return MixtralForCausalLM(cfg)
def example_batch(b):
    x = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": x, "labels": x}
