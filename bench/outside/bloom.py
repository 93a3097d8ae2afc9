"""BLOOM (HF): ALiBi positions, embedding layernorm, tied head."""
import torch
from transformers import BloomConfig, BloomForCausalLM
BATCH_SIZE = 4
def build_model():
    cfg = BloomConfig(vocab_size=128, hidden_size=32, n_layer=3, n_head=4, use_cache=False,
                      hidden_dropout=0.0, attention_dropout=0.0)
    return BloomForCausalLM(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 128, (b, 16), generator=g)
    return {"input_ids": x, "labels": x}
