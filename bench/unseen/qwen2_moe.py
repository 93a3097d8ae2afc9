"""A tiny Qwen2-MoE (HF): routed experts plus a gated shared expert."""
import torch
from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM
BATCH_SIZE = 4
def build_model():
    cfg = Qwen2MoeConfig(vocab_size=128, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                         shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
                         use_cache=False)
    return Qwen2MoeForCausalLM(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 128, (b, 16), generator=g)
    return {"input_ids": x, "labels": x.clone()}
