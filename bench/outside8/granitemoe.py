"""HF GraniteMoE causal LM with labels: ScatterMoE-style experts (tokens sorted by expert and split by their counts read with .tolist(), one batched weight per expert layer), top-2 of 4 experts, embedding / residual / attention / logits multipliers, tied embeddings, the router's auxiliary loss added (output_router_logits)."""
import torch
from transformers import GraniteMoeConfig, GraniteMoeForCausalLM
BATCH_SIZE = 4
def build_model():
    return GraniteMoeForCausalLM(GraniteMoeConfig(vocab_size=128, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                  num_key_value_heads=2, max_position_embeddings=64, num_local_experts=4, num_experts_per_tok=2,
                                                  output_router_logits=True, router_aux_loss_coef=0.01, embedding_multiplier=2.0,
                                                  residual_multiplier=0.5, attention_multiplier=0.25, logits_scaling=2.0, tie_word_embeddings=True,
                                                  use_cache=False))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 32), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
