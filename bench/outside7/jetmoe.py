"""HF JetMoE causal LM with labels: mixture-of-experts in both halves of each layer (a mixture of attention heads, MoA, whose query and output projections are routed experts, and a routed SwiGLU MLP), top-2 of 4 experts, rotary positions, the router's load-balancing auxiliary loss added to the LM loss (output_router_logits=True), tied embeddings."""
import torch
from transformers import JetMoeConfig, JetMoeForCausalLM
BATCH_SIZE = 4
def build_model():
    return JetMoeForCausalLM(JetMoeConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_key_value_heads=2, kv_channels=16,
                                          intermediate_size=64, max_position_embeddings=64, num_local_experts=4, num_experts_per_tok=2,
                                          output_router_logits=True, aux_loss_coef=0.01, attention_dropout=0.0, use_cache=False))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 32), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
