"""HF Gemma2 (sliding-window and global layers alternating, attention logit soft-capping, tied embeddings), causal LM, random weights."""
import torch
from transformers import Gemma2Config, Gemma2ForCausalLM
BATCH_SIZE = 4
def build_model():
    cfg = Gemma2Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=8, use_cache=False)
    return Gemma2ForCausalLM(cfg)
def example_batch(b):
    x = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": x, "labels": x}
