"""HF DeepSeek-V3: multi-head latent attention (low-rank q/kv), routed and shared experts with group-limited top-k routing after a first dense layer, causal LM."""
import torch
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
BATCH_SIZE = 4
def build_model():
    return DeepseekV3ForCausalLM(DeepseekV3Config(vocab_size=128, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, v_head_dim=8, qk_nope_head_dim=8, max_position_embeddings=64, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(3, 128, (b, 16), generator=g)
    return {"input_ids": x, "labels": x.clone()}
