"""HF RWKV causal LM (the pure-PyTorch WKV recurrence, a time-mix and channel-mix per layer)."""
import torch
from transformers import RwkvConfig, RwkvForCausalLM
BATCH_SIZE = 2
def build_model():
    return RwkvForCausalLM(RwkvConfig(vocab_size=128, context_length=32, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
                                      intermediate_size=64, use_cache=False))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 12), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
