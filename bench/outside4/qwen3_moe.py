"""HF Qwen3-MoE causal LM: top-k routed experts, q/k norms, router auxiliary loss on."""
import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
BATCH_SIZE = 4
def build_model():
    return Qwen3MoeForCausalLM(Qwen3MoeConfig(vocab_size=128, hidden_size=32, intermediate_size=64, moe_intermediate_size=32, num_hidden_layers=2,
                                              num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_experts=4, num_experts_per_tok=2,
                                              max_position_embeddings=64, output_router_logits=True, use_cache=False))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
