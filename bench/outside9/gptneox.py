"""HF GPT-NeoX causal LM with labels: partial rotary embeddings (rotary_pct 0.25: only the first quarter of each head's dims is rotated, the rest passed through and concatenated back), one fused QKV projection per layer, and a parallel residual (x + attn(ln1(x)) + mlp(ln2(x)): attention and MLP both read the same layer input, so that input stays live across both branches), the cos/sin table built once in forward and reused by every layer, the shifted LM loss inside the model."""
import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
BATCH_SIZE = 4
def build_model():
    return GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=128, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=128,
                                            max_position_embeddings=64, rotary_pct=0.25, use_parallel_residual=True,
                                            attention_dropout=0.0, hidden_dropout=0.0, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 128, (b, 16), generator=g)
    return {"input_ids": ids, "labels": ids}
