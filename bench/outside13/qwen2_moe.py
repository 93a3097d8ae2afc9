"""HF Qwen2-MoE causal LM with labels from a tiny config: 3 decoder layers of d 32, grouped-query attention (4 query heads, 2 key/value heads) with rotary embeddings and q/k/v biases, each layer's MLP a sparse MoE block of 4 experts (intermediate 48) routed top-2 by a softmax router plus a shared expert (intermediate 64) scaled by its own sigmoid gate; the router's load-balancing auxiliary loss added to the language-model loss (output_router_logits); untied embeddings; a padded attention_mask (the odd rows' last 4 tokens) with labels -100 there."""
import torch
from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM
BATCH_SIZE = 4
def build_model():
    return Qwen2MoeForCausalLM(Qwen2MoeConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                              num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48,
                                              shared_expert_intermediate_size=64, output_router_logits=True,
                                              router_aux_loss_coef=0.01, decoder_sparse_step=1, tie_word_embeddings=False,
                                              attention_dropout=0.0, pad_token_id=0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 16
    ids = torch.randint(1, 128, (b, T), generator=g)
    mask = torch.ones(b, T, dtype=torch.long)
    mask[1::2, T - 4:] = 0
    labels = ids.clone()
    labels[mask == 0] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
