"""HF OLMoE: a causal LM of top-2 routed experts in every layer, QK-norm."""
import torch
from transformers import OlmoeConfig, OlmoeForCausalLM
BATCH_SIZE = 4
def build_model():
    return OlmoeForCausalLM(OlmoeConfig(vocab_size=128, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, num_experts=4, num_experts_per_tok=2, max_position_embeddings=64, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(3, 128, (b, 16), generator=g)
    return {"input_ids": x, "labels": x.clone()}
