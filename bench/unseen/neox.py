"""A tiny GPT-NeoX (HF, random weights): parallel attention + MLP residual, rotary on part of the head."""
import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
BATCH_SIZE = 4
def build_model():
    cfg = GPTNeoXConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, rotary_pct=0.5, use_parallel_residual=True,
                        use_cache=False, hidden_dropout=0.0, attention_dropout=0.0)
    return GPTNeoXForCausalLM(cfg)
def example_batch(b):
    x = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": x, "labels": x}
