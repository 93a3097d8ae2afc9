"""HF Mixtral sparse mixture-of-experts causal LM: four SwiGLU experts per layer, top-2 routing with the router's softmax weights, the load-balancing auxiliary loss added to the LM loss (output_router_logits=True), grouped-query attention, sliding window off."""
import torch
from transformers import MixtralConfig, MixtralForCausalLM
BATCH_SIZE = 4
def build_model():
    return MixtralForCausalLM(MixtralConfig(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                                            max_position_embeddings=64, output_router_logits=True, router_aux_loss_coef=0.02,
                                            attention_dropout=0.0, sliding_window=None, use_cache=False))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
