"""HF Jamba: Mamba layers (the slow, pure-PyTorch scan) interleaved with attention, a mixture of experts every other layer."""
import torch
from transformers import JambaConfig, JambaForCausalLM
BATCH_SIZE = 2
def build_model():
    return JambaForCausalLM(JambaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                                        num_key_value_heads=2, num_experts=2, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1,
                                        attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2,
                                        use_mamba_kernels=False, use_cache=False, max_position_embeddings=64))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
